"""Our murmur2 against the Java client's: the vectors of Kafka's own UtilsTest.testMurmur2
(signed 32-bit there), and every tail length (0-3 bytes after the 4-byte words). The
compiled one (murmur2.c, built with the compiled core) equals the Python reference key for
key, and runs only where the compiled core runs and its build is of the source on disk."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from ledger_stream.kafka import partitioner
from ledger_stream.kafka.partitioner import (
    key_partition_reference,
    murmur2,
    murmur2_reference,
    partition_for,
)
from tests.compiled.support import copy_package, run_python

try:
    from ledger_stream.kafka import _murmur2  # type: ignore[attr-defined]
except ImportError:  # `pip install -e .` alone: no compiled core, no compiled murmur2
    _murmur2 = None

needs_native = pytest.mark.skipif(
    _murmur2 is None, reason="no compiled murmur2 in this tree (`make install` builds it)")

KAFKA_VECTORS = [
    (b"21", -973932308),
    (b"foobar", -790332482),
    (b"a-little-bit-long-string", -985981536),
    (b"a-little-bit-longer-string", -1486304829),
    (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    (b"abc", 479470107),
]


def _signed(value: int) -> int:
    return value - 2**32 if value >= 2**31 else value


@pytest.mark.parametrize(("data", "java"), KAFKA_VECTORS)
def test_murmur2_is_the_java_clients(data: bytes, java: int) -> None:
    assert _signed(murmur2(data)) == java
    assert _signed(murmur2_reference(data)) == java
    if _murmur2 is not None:
        assert _signed(_murmur2.murmur2(data)) == java


def test_every_tail_length_and_the_empty_key_hash_as_the_reference_does() -> None:
    # The reference: the word loop written out with slices (the code before 2026-12-03).
    def reference(data: bytes) -> int:
        m, mask = 0x5BD1E995, 0xFFFFFFFF
        h = (0x9747B28C ^ len(data)) & mask
        whole = len(data) - len(data) % 4
        for i in range(0, whole, 4):
            k = (int.from_bytes(data[i:i + 4], "little") * m) & mask
            k = ((k ^ (k >> 24)) * m) & mask
            h = ((h * m) & mask) ^ k
        for shift, at in ((16, 2), (8, 1), (0, 0)):
            if len(data) % 4 > at:
                h ^= data[whole + at] << shift
        if len(data) % 4:
            h = (h * m) & mask
        h ^= h >> 13
        h = (h * m) & mask
        return h ^ (h >> 15)

    for length in range(0, 41):
        data = bytes((7 * i + length) % 256 for i in range(length))
        assert murmur2(data) == reference(data), length


def test_partition_for_takes_text_or_bytes_and_stays_in_range() -> None:
    assert partition_for("acme/refund/r-1", 12) == partition_for(b"acme/refund/r-1", 12)
    assert all(0 <= partition_for(f"k{i}", 7) < 7 for i in range(200))


@needs_native
def test_the_compiled_murmur2_equals_the_reference_on_many_keys() -> None:
    rng = random.Random(37)
    keys = [bytes(rng.randrange(256) for _ in range(rng.randrange(0, 80)))
            for _ in range(8_000)]
    keys += [f"tenant-{i % 7}/refund/invoice-{i}".encode() for i in range(8_000)]
    keys += ["acme/pay/ünïcödé-€".encode(), b"", b"\x00" * 9, b"\xff" * 13]
    for key in keys:
        assert _murmur2.murmur2(key) == murmur2_reference(key), key
        for count in (1, 12, 1_000, 2**31 - 1):
            assert _murmur2.partition(key, count) == key_partition_reference(key, count), key


@needs_native
def test_the_compiled_murmur2_refuses_what_the_reference_would_not_take() -> None:
    with pytest.raises(TypeError):
        _murmur2.murmur2("text")
    with pytest.raises(TypeError):
        _murmur2.partition("text", 12)
    with pytest.raises(ValueError, match="positive"):
        _murmur2.partition(b"k", 0)


PROBE = """
from ledger_stream.kafka import partitioner
print(partitioner.NATIVE, partitioner.key_partition.__module__)
"""


@needs_native
def test_the_compiled_murmur2_runs_with_the_compiled_core_and_a_current_build(
        tmp_path: Path) -> None:
    copy_package(tmp_path)
    assert run_python(PROBE, cwd=tmp_path, core="compiled").stdout.split() == [
        "True", "ledger_stream.kafka._murmur2"]
    assert run_python(PROBE, cwd=tmp_path, core="pure").stdout.split() == [
        "False", "ledger_stream.kafka.partitioner"]
    source = tmp_path / "ledger_stream" / "kafka" / "murmur2.c"
    source.write_text(source.read_text() + "/* edited after the build */\n")
    stale = run_python(PROBE, cwd=tmp_path, core="compiled")
    assert stale.stdout.split() == ["False", "ledger_stream.kafka.partitioner"]
    assert "the compiled murmur2 is older than" in stale.stderr


def test_the_suite_runs_the_reference() -> None:
    assert not partitioner.NATIVE and partitioner.murmur2 is murmur2_reference

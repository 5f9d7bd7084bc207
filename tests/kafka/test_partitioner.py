"""Our murmur2 against the Java client's: the vectors of Kafka's own UtilsTest.testMurmur2
(signed 32-bit there), and every tail length (0-3 bytes after the 4-byte words)."""

from __future__ import annotations

import pytest

from ledger_stream.kafka.partitioner import murmur2, partition_for

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

"""Kafka's default partitioner (murmur2, as the Java client and librdkafka's
``murmur2_random`` compute it), so a reader can find one key's partition without scanning.

:func:`murmur2_reference` is the reference implementation. The build of the compiled core
(setup.py) also compiles ``murmur2.c`` beside it into ``_murmur2``, which the processor uses
to check every input record's partition (a few hundred ns a key instead of about 6 µs);
it runs only where the compiled core runs (``LEDGER_CORE``, ledger_stream/core.py) and its
build is as new as ``murmur2.c``, else the reference does.
"""

from __future__ import annotations

import hashlib
import struct
import warnings
from collections.abc import Callable
from pathlib import Path

from ledger_stream.core import chosen

_M = 0x5BD1E995
_MASK = 0xFFFFFFFF
_WORDS = struct.Struct("<I")
C_SOURCE = Path(__file__).with_name("murmur2.c")


def murmur2_reference(data: bytes) -> int:
    """Kafka's murmur2 of ``data`` as an unsigned 32-bit integer."""
    length = len(data)
    h = (0x9747B28C ^ length) & _MASK
    whole = length - length % 4
    # Unpacking the 4-byte words in one call is a third cheaper than slicing each.
    for (k,) in _WORDS.iter_unpack(data[:whole]):
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    rest = length % 4
    if rest == 3:
        h ^= data[whole + 2] << 16
    if rest >= 2:
        h ^= data[whole + 1] << 8
    if rest >= 1:
        h ^= data[whole]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h


def key_partition_reference(key: bytes, partitions: int) -> int:
    """The partition of ``key`` among ``partitions`` (the reference)."""
    return (murmur2_reference(key) & 0x7FFFFFFF) % partitions


def source_digest(path: Path = C_SOURCE) -> str:
    """SHA-256 of ``murmur2.c``: the build embeds the digest of the source it compiled."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _native() -> tuple[Callable[[bytes], int], Callable[[bytes, int], int]] | None:
    """The compiled (murmur2, partition), when the compiled core runs and the build is of
    the ``murmur2.c`` on disk (a source absent, as in a wheel, is taken as built)."""
    if chosen() != "compiled":  # ledger_stream's __init__ chose, before importing this
        return None
    try:
        from ledger_stream.kafka import _murmur2  # type: ignore[attr-defined]
    except ImportError:
        return None
    if C_SOURCE.exists() and source_digest() != _murmur2.SOURCE_DIGEST:
        warnings.warn("the compiled murmur2 is older than ledger_stream/kafka/murmur2.c "
                      "(rebuild it: `make install`); running the Python one",
                      RuntimeWarning, stacklevel=2)
        return None
    return _murmur2.murmur2, _murmur2.partition


_NATIVE = _native()
NATIVE = _NATIVE is not None  # which one runs (tests/kafka/test_partitioner.py)
murmur2: Callable[[bytes], int] = _NATIVE[0] if _NATIVE else murmur2_reference
# The partition of a bytes key: what the processor calls for every record it reads.
key_partition: Callable[[bytes, int], int] = (
    _NATIVE[1] if _NATIVE else key_partition_reference)


def partition_for(key: str | bytes, partitions: int) -> int:
    data = key.encode("utf-8") if isinstance(key, str) else key
    return key_partition(data, partitions)

"""The view's store: one RocksDB (rocksdict, raw bytes) for every receipts partition.

- ``r<key>``: the key's latest receipt, the Avro bytes exactly as read from the topic;
- ``p<partition: 4 bytes big-endian>``: the position the view has applied the partition up
  to (the next offset it will read), 8 bytes big-endian;
- ``mtopic``: the id Kafka gave the topic these rows came from. A topic deleted and created
  again has another id, and its positions and rows mean nothing for the new one.

The timeline (every record of every ledger topic, by key) lives beside them:

- ``h<key length: 2 bytes><key><topic: 1 byte><partition: 4><offset: 8>``: one record, as
  ``<1: a value follows, 0: a tombstone><timestamp ms: 8 bytes><value bytes>``. A key's
  records are one contiguous range, read with one seek;
- ``q<topic: 1 byte><partition: 4>``: the position in each topic's partition;
- ``d<tenant>\0<decision id>``: an operator's decision (its Avro bytes) by its tenant and id,
  whatever its key: a tenant's decision id is refused for a second decision on any of its
  keys (operate/decisions.py);
- ``mhistory``: the ids of the topics the timeline came from (one id per line, in the
  topics' order). Any change empties the whole timeline, which is read again.

A batch's receipts and the positions it reached are written in one WriteBatch, so after a
crash the view resumes from a position that matches its rows: a receipt is applied again at
worst, which rewrites the same bytes.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from rocksdict import WriteBatch

from ledger_stream.state.exceptions import StoreError
from ledger_stream.state.rocksdb import open_raw

_ROW = b"r"
_POSITION = b"p"
_TOPIC_ID = b"mtopic"
_RECORD = b"h"
_HISTORY_POSITION = b"q"
_HISTORY_IDS = b"mhistory"
_DECISION = b"d"
MAX_KEY = 0xFFFF  # bytes; the ledger's keys are far shorter (domain/keys.py)


@dataclass(frozen=True)
class StoredRecord:
    """One record of a key as the timeline holds it."""

    topic: int  # the index of its topic in the view's list
    partition: int
    offset: int
    timestamp_ms: int
    value: bytes | None  # None: a tombstone


def _key_prefix(key: bytes) -> bytes:
    if len(key) > MAX_KEY:
        raise ValueError(f"a key of {len(key)} bytes is longer than the timeline keeps")
    return _RECORD + len(key).to_bytes(2, "big") + key


def record_key(key: bytes, topic: int, partition: int, offset: int) -> bytes:
    return (_key_prefix(key) + topic.to_bytes(1, "big") + partition.to_bytes(4, "big")
            + offset.to_bytes(8, "big"))


def decision_key(tenant: str, decision_id: str) -> bytes:
    return _DECISION + tenant.encode("utf-8") + b"\x00" + decision_id.encode("utf-8")


def record_value(timestamp_ms: int, value: bytes | None) -> bytes:
    flag = b"\x00" if value is None else b"\x01"
    return flag + max(0, timestamp_ms).to_bytes(8, "big") + (value or b"")


def _position_key(partition: int) -> bytes:
    return _POSITION + partition.to_bytes(4, "big")


class ViewStore:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._db = open_raw(path, "view store")

    def latest(self, key: bytes) -> bytes | None:
        value: bytes | None = self._db.get(_ROW + key)
        return value

    def _scan(self, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
        """(key without ``prefix``, value) of every entry whose key starts with ``prefix``,
        in key order."""
        it = self._db.iter()
        it.seek(prefix)
        while it.valid():
            raw_key: bytes = it.key()
            if not raw_key.startswith(prefix):
                return
            yield raw_key[len(prefix):], it.value()
            it.next()

    def _write(self, entries: Iterable[tuple[bytes, bytes]]) -> None:
        """Every entry in one write batch: all of them or none."""
        wb = WriteBatch(raw_mode=True)
        for key, value in entries:
            wb.put(key, value)
        try:
            self._db.write(wb)
        except Exception as exc:
            raise StoreError(f"writing the view store {self.path} failed: {exc}") from exc

    def positions(self) -> dict[int, int]:
        return {int.from_bytes(k, "big"): int.from_bytes(v, "big")
                for k, v in self._scan(_POSITION)}

    def apply(self, rows: dict[bytes, bytes], positions: dict[int, int]) -> None:
        """Write ``rows`` (key → latest receipt) and the positions they bring each partition
        to, together."""
        self._write([*((_ROW + key, value) for key, value in rows.items()),
                     *((_position_key(p), offset.to_bytes(8, "big"))
                       for p, offset in positions.items())])

    def topic_id(self) -> str | None:
        raw: bytes | None = self._db.get(_TOPIC_ID)
        return raw.decode("utf-8") if raw is not None else None

    def reset(self, topic_id: str) -> None:
        """Forget every row and position; the store now belongs to topic ``topic_id``. The id
        is written last, so a crash halfway resets again on the next start."""
        try:
            self._db.delete_range(_ROW, bytes([_ROW[0] + 1]))
            self._db.delete_range(_POSITION, bytes([_POSITION[0] + 1]))
            self._db.put(_TOPIC_ID, topic_id.encode("utf-8"))
        except Exception as exc:
            raise StoreError(f"resetting the view store {self.path} failed: {exc}") from exc

    # -- the timeline ------------------------------------------------------------------------

    def records(self, key: bytes) -> list[StoredRecord]:
        """Every record of ``key`` the timeline holds, by topic, partition and offset."""
        # The key's length is in the prefix, so every entry under it is this key's.
        return [StoredRecord(
            tail[0], int.from_bytes(tail[1:5], "big"), int.from_bytes(tail[5:], "big"),
            int.from_bytes(value[1:9], "big"), value[9:] if value[:1] == b"\x01" else None)
            for tail, value in self._scan(_key_prefix(key))]

    def history_positions(self) -> dict[tuple[int, int], int]:
        """(topic index, partition) → the next offset the timeline reads."""
        return {(k[0], int.from_bytes(k[1:5], "big")): int.from_bytes(v, "big")
                for k, v in self._scan(_HISTORY_POSITION)}

    def apply_history(self, records: dict[bytes, bytes],
                      positions: dict[tuple[int, int], int]) -> None:
        """Write ``records`` (``record_key`` → ``record_value``) and the positions they bring
        each topic's partitions to, together."""
        self._write([*records.items(), *(
            (_HISTORY_POSITION + topic.to_bytes(1, "big") + partition.to_bytes(4, "big"),
             offset.to_bytes(8, "big")) for (topic, partition), offset in positions.items())])

    def decision(self, tenant: str, decision_id: str) -> bytes | None:
        """The tenant's decision recorded under ``decision_id`` (Avro bytes), or None."""
        value: bytes | None = self._db.get(decision_key(tenant, decision_id))
        return value

    def history_ids(self) -> list[str] | None:
        raw: bytes | None = self._db.get(_HISTORY_IDS)
        return raw.decode("utf-8").split("\n") if raw is not None else None

    def reset_history(self, topic_ids: list[str]) -> None:
        """Forget the whole timeline; it now belongs to the topics ``topic_ids``."""
        try:
            self._db.delete_range(_RECORD, bytes([_RECORD[0] + 1]))
            self._db.delete_range(_HISTORY_POSITION, bytes([_HISTORY_POSITION[0] + 1]))
            self._db.delete_range(_DECISION, bytes([_DECISION[0] + 1]))
            self._db.put(_HISTORY_IDS, "\n".join(topic_ids).encode("utf-8"))
        except Exception as exc:
            raise StoreError(f"resetting the view store {self.path} failed: {exc}") from exc

    def close(self) -> None:
        self._db.close()

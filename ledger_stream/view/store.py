"""The view's store: one RocksDB (rocksdict, raw bytes) for every receipts partition.

- ``r<key>``: the key's latest receipt, the Avro bytes exactly as read from the topic;
- ``p<partition: 4 bytes big-endian>``: the position the view has applied the partition up
  to (the next offset it will read), 8 bytes big-endian;
- ``mtopic``: the id Kafka gave the topic these rows came from. A topic deleted and created
  again has another id, and its positions and rows mean nothing for the new one.

A batch's receipts and the positions it reached are written in one WriteBatch, so after a
crash the view resumes from a position that matches its rows: a receipt is applied again at
worst, which rewrites the same bytes.
"""

from __future__ import annotations

from pathlib import Path

from rocksdict import WriteBatch

from ledger_stream.state.exceptions import StoreError
from ledger_stream.state.rocksdb import open_raw

_ROW = b"r"
_POSITION = b"p"
_TOPIC_ID = b"mtopic"


def _position_key(partition: int) -> bytes:
    return _POSITION + partition.to_bytes(4, "big")


class ViewStore:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._db = open_raw(path, "view store")

    def latest(self, key: bytes) -> bytes | None:
        value: bytes | None = self._db.get(_ROW + key)
        return value

    def positions(self) -> dict[int, int]:
        found: dict[int, int] = {}
        it = self._db.iter()
        it.seek(_POSITION)
        while it.valid():
            raw_key = it.key()
            if not raw_key.startswith(_POSITION):
                break
            found[int.from_bytes(raw_key[1:], "big")] = int.from_bytes(it.value(), "big")
            it.next()
        return found

    def apply(self, rows: dict[bytes, bytes], positions: dict[int, int]) -> None:
        """Write ``rows`` (key → latest receipt) and the positions they bring each partition
        to, together."""
        wb = WriteBatch(raw_mode=True)
        for key, value in rows.items():
            wb.put(_ROW + key, value)
        for partition, offset in positions.items():
            wb.put(_position_key(partition), offset.to_bytes(8, "big"))
        try:
            self._db.write(wb)
        except Exception as exc:
            raise StoreError(f"writing the view store {self.path} failed: {exc}") from exc

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

    def close(self) -> None:
        self._db.close()

"""A consumed record without a broker: the parts of ``confluent_kafka.Message`` the
processor's batch reads. For the unit tests and the fuzzer (reliability/fuzz.py)."""

from __future__ import annotations

from dataclasses import dataclass

from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME


@dataclass(slots=True)
class FakeMessage:
    _topic: str
    _partition: int
    _offset: int
    _timestamp: int
    _key: bytes | None
    _value: bytes | None
    _headers: list[tuple[str, bytes]] | None = None

    def topic(self) -> str:
        return self._topic

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset

    def timestamp(self) -> tuple[int, int]:
        return TIMESTAMP_LOG_APPEND_TIME, self._timestamp

    def key(self) -> bytes | None:
        return self._key

    def value(self) -> bytes | None:
        return self._value

    def headers(self) -> list[tuple[str, bytes]] | None:
        return self._headers

    def error(self) -> None:
        return None

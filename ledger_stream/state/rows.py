"""A key's state as the bytes the store and the changelog hold: ``KeyState.to_row()`` as
compact JSON (the same bytes in both, encoded once)."""

from __future__ import annotations

import json
from typing import Any

import orjson

from ledger_stream.domain.state import FIELD_INDEX, KeyState, Phase

_SEPARATORS = (",", ":")


def encode_row(state: KeyState) -> bytes:
    return encode_values(state.to_row())


def encode_values(values: list[Any]) -> bytes:
    """A row's bytes from its field values in ``KeyState`` field order: compact JSON, not
    ASCII-escaped. orjson writes the same bytes as ``json.dumps`` does for every value a row
    holds (tests/state/test_rows.py compares them); what it refuses (an integer past 64
    bits, a lone surrogate) goes through ``json``, which writes it or raises as before.

    The bytes are copied out of orjson's: orjson builds each in a buffer of 1 KiB or more
    and shrinks it in place, and a batch keeps its rows until the store write, so the
    allocator's shrunk blocks piled up; a row then cost 4 to 6 µs instead of 0.5 (the copy
    is a small object of CPython's own allocator, the buffer freed at once)."""
    try:
        return memoryview(orjson.dumps(values)).tobytes()
    except TypeError:  # orjson.JSONEncodeError
        return json.dumps(values, separators=_SEPARATORS, ensure_ascii=False).encode()


# What an intent's args and payload JSON may take together in its key's row, as the row
# writes them: JSON strings, so each quote or backslash in them takes two bytes (and a raw
# control character six). The row goes to the changelog, whose producer refuses a record
# over 1,000,000 bytes (librdkafka's message.max.bytes); the rest of the row, its key and
# headers fit in what is left. Past it the processor could never checkpoint the intent's
# batch: it dead-letters the intent instead, and the client refuses it before sending.
ROW_TEXTS_MAX = 900_000
_BYTES_PER_CHAR_MAX = 6  # a control character, written \u00XX


def row_texts_too_large(*texts: str) -> str | None:
    """Why a key's row could not hold ``texts`` (an intent's args and payload JSON), or
    None. Exact (the row's own encoding) only for texts long enough to come near the bound:
    the short ones, nearly all, cost a length each."""
    if sum(map(len, texts)) * _BYTES_PER_CHAR_MAX <= ROW_TEXTS_MAX:
        return None
    size = sum(len(encode_values([text])) - 2 for text in texts)  # less the list's [ and ]
    if size <= ROW_TEXTS_MAX:
        return None
    return (f"its args and payload take {size} bytes in the key's state row, larger than "
            f"Kafka accepts there (at most {ROW_TEXTS_MAX})")


def decode_row(row: bytes) -> KeyState:
    return KeyState.from_row(json.loads(row))


def decode_values(row: bytes) -> list[Any]:
    """The row's field values, in ``KeyState`` field order (a shorter, older row leaves the
    fields appended since at their defaults)."""
    values: list[Any] = json.loads(row.decode("utf-8"))
    return values


class RowDeadline:
    """The fields a deadline reads (``domain.deadlines.Deadlined``), straight from a row's
    values: ``due_ms(RowDeadline(values), policy) == due_ms(decode_row(row), policy)``
    without building the KeyState (restore computes one per key it restores)."""

    __slots__ = ("_values",)

    def __init__(self, values: list[Any]) -> None:
        self._values = values

    def _int(self, index: int) -> int:  # every field read here defaults to 0
        # The stored value as KeyState.from_row would hold it (no coercion).
        value: int = self._values[index] if index < len(self._values) else 0
        return value

    @property
    def phase(self) -> Phase:
        return _PHASE_OF[self._values[_PHASE]]

    @property
    def attempt(self) -> int:
        return self._int(_ATTEMPT)

    @property
    def stall_alerted(self) -> int:
        return self._int(_STALL_ALERTED)

    @property
    def not_before_ms(self) -> int:
        return self._int(_NOT_BEFORE)

    @property
    def phase_since_ms(self) -> int:
        return self._int(_PHASE_SINCE)

    @property
    def lease_until_ms(self) -> int:
        return self._int(_LEASE_UNTIL)

    @property
    def terminal_at_ms(self) -> int:
        return self._int(_TERMINAL_AT)

    @property
    def sent_at_ms(self) -> int:
        return self._int(_SENT_AT)

    @property
    def pregrant_until_ms(self) -> int:
        return self._int(_PREGRANT_UNTIL)

    @property
    def action(self) -> str:
        value: str = self._values[_ACTION] if len(self._values) > _ACTION else ""
        return value


_PHASE_OF = {phase.value: phase for phase in Phase}
_PHASE, _ATTEMPT, _STALL_ALERTED, _ACTION = (
    FIELD_INDEX[n] for n in ("phase", "attempt", "stall_alerted", "action"))
_NOT_BEFORE, _PHASE_SINCE, _LEASE_UNTIL, _TERMINAL_AT, _SENT_AT = (FIELD_INDEX[n] for n in (
    "not_before_ms", "phase_since_ms", "lease_until_ms", "terminal_at_ms", "sent_at_ms"))
_PREGRANT_UNTIL = FIELD_INDEX["pregrant_until_ms"]

"""A key's state as the bytes the store and the changelog hold: ``KeyState.to_row()`` as
compact JSON (the same bytes in both, encoded once)."""

from __future__ import annotations

import json

from ledger_stream.domain.state import KeyState

_SEPARATORS = (",", ":")


def encode_row(state: KeyState) -> bytes:
    return json.dumps(state.to_row(), separators=_SEPARATORS, ensure_ascii=False).encode()


def decode_row(row: bytes) -> KeyState:
    return KeyState.from_row(json.loads(row))

"""Golden decisions: every row of docs/protocol.md's decision table (tests/domain/
protocol_doc.py), with its complete outputs and next state, as JSON.

The decision table shows what kind of output each row produces; this pins every field
(ids, texts, times, the history record), so any change to what ``decide`` emits is a
deliberate one. Regenerate with ``python -m tests.domain.golden > tests/domain/golden.json``
after checking the diff.
"""

from __future__ import annotations

import json
from enum import Enum
from typing import Any

from ledger_stream.serde.records import to_record
from tests.domain.protocol_doc import ROWS, Row, _run
from tests.factories import reset_ids


def _plain(value: Any) -> Any:
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def decided(row: Row) -> dict[str, Any]:
    """The row's decision, with event ids numbered from 1 (the same on every run)."""
    reset_ids()
    _, state, outputs = _run(row)
    return {
        "row": row.event,
        "next_state": _plain(state.to_row()),
        "outputs": [{"type": type(o).__name__, **_plain(to_record(o))} for o in outputs],
    }


def golden() -> list[dict[str, Any]]:
    return [decided(row) for row in ROWS]


if __name__ == "__main__":
    print(json.dumps(golden(), indent=1, sort_keys=True))

"""The upgrade check's verdicts as a table (people) or JSON (scripts)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from ledger_stream.upgrade.verdict import ThreadVerdict


def as_json(verdicts: Sequence[ThreadVerdict]) -> str:
    return json.dumps({"unsafe": sum(v.unsafe for v in verdicts),
                       "threads": [_thread(v) for v in verdicts]}, sort_keys=True)


def _thread(v: ThreadVerdict) -> dict[str, Any]:
    return {"thread": v.thread_id, "checkpoint": v.checkpoint_id, "verdict": v.verdict,
            "pending_nodes": list(v.pending_nodes),
            "findings": [{**asdict(f), "kind": f.kind.value} for f in v.findings]}


def as_table(verdicts: Sequence[ThreadVerdict]) -> str:
    lines = ["thread\tverdict\tfinding\tkey or node\tdetail"]
    for v in verdicts:
        if not v.findings:
            lines.append(f"{v.thread_id}\t{v.verdict}\t-\t-\tnothing pending")
        for f in v.findings:
            lines.append(f"{v.thread_id}\t{v.verdict}\t{f.kind.value}\t{f.key or f.node}\t"
                         f"{f.detail}")
    unsafe = sum(v.unsafe for v in verdicts)
    lines.append(f"{len(verdicts)} threads checked, {unsafe} unsafe")
    return "\n".join(lines)

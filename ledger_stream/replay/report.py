"""A replay plan as a table (people) or JSON (scripts)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from ledger_stream.replay.plan import CheckpointPlan, exit_status


def as_json(thread_id: str, plans: Sequence[CheckpointPlan]) -> str:
    return json.dumps({"thread": thread_id, "exit_status": exit_status(plans),
                       "checkpoints": [_checkpoint(p) for p in plans]}, sort_keys=True)


def _checkpoint(p: CheckpointPlan) -> dict[str, Any]:
    return {"checkpoint": p.checkpoint_id, "step": p.step, "source": p.source,
            "next": list(p.next), "verdict": p.verdict.value,
            "findings": [{**asdict(f), "kind": f.kind.value} for f in p.findings]}


def as_table(thread_id: str, plans: Sequence[CheckpointPlan]) -> str:
    lines = [f"thread {thread_id}: a replay from each checkpoint, newest first",
             "checkpoint\tstep\tsource\tnext\tverdict\tfinding\tkey or node\tdetail"]
    for p in plans:
        where = (f"{p.checkpoint_id}\t{p.step}\t{p.source or '-'}\t{','.join(p.next) or '-'}"
                 f"\t{p.verdict.value}")
        if not p.findings:
            lines.append(f"{where}\t-\t-\tasks the ledger nothing")
        for f in p.findings:
            lines.append(f"{where}\t{f.kind.value}\t{f.key or f.node or '-'}\t{f.detail}")
    safe = sum(p.verdict.value == "safe" for p in plans)
    lines.append(f"{len(plans)} checkpoints, {safe} safe to replay from")
    return "\n".join(lines)

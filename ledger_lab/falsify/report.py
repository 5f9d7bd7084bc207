"""The matrix as a plain-text table (one line per run) and as a JSON document."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ledger_lab.falsify.result import RunResult

COLUMNS = ("case", "mode", "result", "effects/key", "attempt ids", "final status",
           "conflicts", "time", "scenario")


def table(results: Sequence[RunResult]) -> str:
    rows = [COLUMNS, *(_row(r) for r in results)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS) - 1)]
    lines = []
    for n, row in enumerate(rows):
        cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=False)]
        lines.append("  ".join([*cells, row[-1]]).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in [*widths, len(COLUMNS[-1])]))
    failed = [r for r in results if not r.passed]
    if failed:
        lines.append("")
        lines.extend(f"FAIL {r.label} ({_mode(r)}): {r.why}" for r in failed)
    return "\n".join(lines)


def document(gate: dict[str, Any], passed: bool, results: Sequence[RunResult],
             seconds: float) -> dict[str, Any]:
    return {"release_gate": gate, "passed": passed, "seconds": round(seconds, 1),
            "runs": [r.to_json() for r in results]}


def _row(r: RunResult) -> tuple[str, ...]:
    effects = ",".join(str(n) for n in r.effects.values()) or "-"
    attempts = "-" if not r.with_ledger else (
        ("distinct " if r.distinct_attempt_ids else "REPEATED ")
        + "/".join(str(len(ids)) for ids in r.attempt_ids.values()))
    statuses = ",".join(sorted(set(r.receipts.values()))) or "-"
    conflicts = {None: "-", True: "rejected", False: "ACCEPTED"}[r.conflicts_rejected]
    return (r.label, _mode(r), "pass" if r.passed else "FAIL", effects, attempts, statuses,
            conflicts, f"{r.seconds:.0f}s", r.title)


def _mode(r: RunResult) -> str:
    return "ledger" if r.with_ledger else "bypassed"

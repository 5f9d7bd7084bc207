"""A key's evidence document as a Markdown report for an incident review: the key's picture
(its timeline in four lanes, as the console draws it), the ledger's receipts, the workflow
side (each thread's checkpoints around the step) and the target side.

Guarantee: the report is made from the (already redacted) evidence document alone and adds
no value of its own; every text a caller or a target chose is put in code spans or the
picture's code block with backticks and line breaks removed, so it cannot forge Markdown.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

# The console's key picture (gateway/static/keypicture.js): who each record belongs to.
LANES = ("agent · operator", "ledger", "connector", "target")
AGENT_EVENTS = frozenset({"Intent", "OperatorResolution", "AuditRecord"})
TARGET_EVENTS = frozenset({"AttemptOutcome", "ReconcileResult"})
LANE_W = 24


def lane_of(event: str) -> int:
    """The lane of a timeline row's event, as the console's picture places it."""
    if event in AGENT_EVENTS:
        return 0
    if event == "AttemptClaim":
        return 2
    return 3 if event in TARGET_EVENTS else 1


def _plain(value: Any, width: int | None = None) -> str:
    text = " ".join(str(value).replace("`", "'").split())
    return text if width is None or len(text) <= width else text[:width - 1] + "…"


def _code(value: Any) -> str:
    return f"`{_plain(value)}`" if value not in (None, "") else "-"


def _when(ms: int | None) -> str:
    if ms is None:
        return "-"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%H:%M:%S.%f")[:-3]


def _label(row: Mapping[str, Any]) -> str:
    extra = (row.get("origin") if row["event"] == "Intent" else None) or row.get("outcome") \
        or row.get("receipt") or ""
    flagged = " FLAGGED" if row.get("flag") else ""  # a re-run that read something else
    return f"{row['event']}{flagged} {extra}".strip()


def picture(rows: Iterable[Mapping[str, Any]]) -> list[str]:
    """The key's lanes as text: one line per timeline row, its mark in its lane."""
    lines = ["time (UTC)    " + "".join(f"{lane:<{LANE_W}}" for lane in LANES)]
    for row in rows:
        lane = lane_of(str(row["event"]))
        cells = ["│".ljust(LANE_W)] * len(LANES)
        cells[lane] = ("● " + _plain(_label(row), LANE_W - 3)).ljust(LANE_W)
        lines.append(f"{_when(row.get('ledger_time_ms')):<14}" + "".join(cells).rstrip())
    return ["```text", *lines, "```"]


def _receipts(doc: Mapping[str, Any]) -> list[str]:
    lines = ["| offset | intent | status | reason | key state | external id |",
             "|---|---|---|---|---|---|"]
    for r in doc.get("receipts", []):
        lines.append(f"| {r.get('offset')} | {_code(r.get('intent_event_id'))} | "
                     f"{_code(r.get('status'))} | {_code(r.get('reason'))} | "
                     f"{_code(r.get('key_status'))} | {_code(r.get('external_id'))} |")
    return lines


def _checkpoint(title: str, cp: Mapping[str, Any] | None) -> list[str]:
    if cp is None:
        return [f"- **{title}**: not in the checkpointer"]
    tasks = ", ".join(
        f"{_code(t['task_id'])} ({', '.join(_code(c) for c in t['channels'])}"
        f"{'; interrupted' if t['interrupted'] else ''}{'; error' if t['error'] else ''})"
        for t in cp["pending_tasks"]) or "none"
    channels = ", ".join(f"{_code(c['name'])} ({c['size']} B)" for c in cp["channels"])
    return [f"- **{title}** {_code(cp['checkpoint_id'])}: step {cp.get('step')}, source "
            f"{_code(cp.get('source'))}, written {_code(cp.get('ts'))}",
            f"  - next: {', '.join(_code(n) for n in cp['next']) or 'nothing (done or waiting)'}",
            f"  - pending tasks: {tasks}",
            f"  - pending writes: {len(cp['pending_writes'])}; channels: {channels or 'none'}"]


def _threads(threads: Iterable[Mapping[str, Any]]) -> list[str]:
    lines: list[str] = []
    for side in threads:
        if side.get("thread_id") is None:
            lines += ["", f"{side['note']}: {', '.join(_code(i) for i in side['intents'])}"]
            continue
        lines += ["", f"### Thread {_code(side['thread_id'])}", "",
                  f"Graph {_code(side['graph'])} version {_code(side['version'])}; "
                  f"{side['checkpoints_in_thread']} checkpoints, the latest "
                  f"{_code(side['latest_checkpoint_id'])}."]
        if side.get("note"):
            lines.append(f"Note: {side['note']}.")
        for step in side["steps"]:
            intents = ", ".join(f"{_code(i['intent_event_id'])} ({_plain(i['origin'])})"
                                for i in step["intents"])
            lines += ["", f"Step at node {_code(step['node'])} from checkpoint "
                      f"{_code(step['checkpoint_id'])}; intents: {intents}", ""]
            lines += _checkpoint("before", step["before"])
            for after in step["after"]:
                lines += _checkpoint("after", after)
            if step.get("note"):
                lines.append(f"- note: {step['note']}")
    return lines


def _target(side: Mapping[str, Any] | None) -> list[str]:
    if side is None:
        return ["", "Not asked (no target given)."]
    agrees = {True: "agrees with the ledger", False: "DISAGREES with the ledger",
              None: "nothing to compare"}[side.get("agrees")]
    why = f" ({_plain(side['why'])})" if side.get("why") else ""
    return ["", f"Target {_code(side.get('target'))}: **{side['answer']}**{why}. "
            "Its receipt id: "
            f"{_code(side.get('receipt_id'))}; the ledger's: "
            f"{', '.join(_code(i) for i in side['ledger_receipt_ids']) or 'none'}; {agrees}."]


def _observations(entries: Iterable[Mapping[str, Any]]) -> list[str]:
    """What each intent's step read from outside (digests and sizes only), and changes."""
    lines = ["", "## Observations", ""]
    for entry in entries:
        changed = "; ".join(_code(c) for c in entry.get("changed") or [])
        lines.append(f"- intent {_code(entry.get('intent_event_id'))} "
                     f"({_plain(entry.get('origin'))}): {len(entry.get('observed') or [])} "
                     f"observed" + (f"; **changed**: {changed}" if changed else ""))
    return lines if len(lines) > 3 else []


def markdown(doc: Mapping[str, Any]) -> str:
    """The report of an evidence document (``evidence`` plus its workflow and target
    sides when they were asked for)."""
    lines = [f"# Evidence for {_code(doc['key'])}", "",
             f"State: **{doc.get('state') or 'unknown (no receipt)'}**. Written "
             f"{_code(datetime.fromtimestamp(doc['generated_at_ms'] / 1000, UTC).isoformat())}."
             f" Redaction: {doc['redaction']}.", "", "## The key's picture", "",
             *picture(doc.get("timeline", [])), "", "## Receipts", "", *_receipts(doc),
             "", "## Workflow side"]
    workflow = doc.get("workflow")
    lines += _threads(workflow["threads"]) if workflow else ["", "Not asked (no checkpointer "
                                                             "given)."]
    lines += ["", "## Target side", *_target(doc.get("target_record"))]
    lines += _observations(doc.get("observations") or [])
    return "\n".join(lines) + "\n"

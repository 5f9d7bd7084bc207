"""One run of the refund agent for one thread, as a worker process would do it.

    python -m examples.refund_agent.worker --db agent.sqlite --thread t1 start --invoice inv-1 --amount 125
    python -m examples.refund_agent.worker --db agent.sqlite --thread t1 approve
    python -m examples.refund_agent.worker --db agent.sqlite --thread t1 resume
    python -m examples.refund_agent.worker --db agent.sqlite --thread t1 replay
    python -m examples.refund_agent.worker --db agent.sqlite --thread t1 fork [--amount 999]

Kafka and the ledger topics come from LEDGER_* settings. ``--bypass-url`` runs the same graph
with the refund tool calling the payments API directly (no ledger), to show what the ledger
prevents. Prints the thread's final state as one JSON line.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
import time
import uuid
from contextlib import ExitStack
from typing import Any

from langchain_core.messages import AIMessage
from langgraph.types import Command

from examples.refund_agent.graph import (
    VERSION,
    bypass_refund_tool,
    build_graph,
    ledger_refund_tool,
    refund_args,
    refund_key,
)
from ledger_stream import LedgerClient, args_hash, sign_approval
from ledger_stream.config import Settings
from ledger_stream.langgraph import ToolCall


def _checkpointer(args: argparse.Namespace, stack: ExitStack) -> Any:
    if args.saver == "postgres":
        from langgraph.checkpoint.postgres import PostgresSaver

        saver = stack.enter_context(PostgresSaver.from_conn_string(args.db))
        saver.setup()
        return saver
    from langgraph.checkpoint.sqlite import SqliteSaver

    return SqliteSaver(sqlite3.connect(args.db, check_same_thread=False))


def _approval(settings: Settings, graph: Any, config: dict[str, Any]) -> dict[str, Any]:
    """What the approval service would sign for the refund the thread is waiting on."""
    pending = graph.get_state(config).tasks[0].interrupts[0].value["args"]
    material = refund_args(pending["invoice"], pending["amount"])
    approval = sign_approval(
        settings.approval_secret.get_secret_value().encode(),
        refund_key(material, ToolCall("", "")), f"ap-{uuid.uuid4().hex[:8]}",
        args_hash(material), "", int(time.time() * 1000) + 600_000)
    return {"approval_id": approval.approval_id, "payload_hash": approval.payload_hash,
            "policy_revision": approval.policy_revision,
            "expires_at_ms": approval.expires_at_ms, "signature": approval.signature}


def _before_tools(graph: Any, config: dict[str, Any]) -> dict[str, Any]:
    """The checkpoint whose next step is the tool call (time travel's usual target)."""
    for snapshot in graph.get_state_history(config):
        if snapshot.next == ("tools",):
            return dict(snapshot.config)
    raise SystemExit("no checkpoint before the tools step in this thread")


def _fork(graph: Any, config: dict[str, Any], amount: float | None) -> dict[str, Any]:
    """Fork the pre-call checkpoint; with ``amount``, the model's tool call is edited."""
    before = _before_tools(graph, config)
    snapshot = graph.get_state(before)
    call_message = snapshot.values["messages"][-1]
    calls = [dict(c) for c in call_message.tool_calls]
    if amount is not None:
        calls[0]["args"] = {**calls[0]["args"], "amount": amount}
    edited = AIMessage(content="", tool_calls=calls, id=call_message.id)
    return dict(graph.update_state(before, {"messages": [edited]}, as_node="approval"))


def run(args: argparse.Namespace) -> dict[str, Any]:
    settings = Settings()
    with ExitStack() as stack:
        client = stack.enter_context(LedgerClient(settings)) if not args.bypass_url else None
        tool = bypass_refund_tool(args.bypass_url) if args.bypass_url else \
            ledger_refund_tool(client, args.version)  # type: ignore[arg-type]
        graph = build_graph(tool, _checkpointer(args, stack))
        config: dict[str, Any] = {"configurable": {"thread_id": args.thread}}
        invoke = {"durability": args.durability}
        if args.action == "start":
            graph.invoke({"invoice": args.invoice, "amount": args.amount, "messages": []},
                         config, **invoke)
        elif args.action == "approve":
            graph.invoke(Command(resume=_approval(settings, graph, config)), config, **invoke)
        elif args.action == "resume":
            graph.invoke(None, config, **invoke)
        elif args.action == "replay":
            graph.invoke(None, _before_tools(graph, config), **invoke)
        elif args.action == "fork":
            graph.invoke(None, _fork(graph, config, args.amount), **invoke)
        values = graph.get_state(config).values
        return {"thread": args.thread, "ledger_receipts": values.get("ledger_receipts", {}),
                "last_message": str(values["messages"][-1].content) if values.get("messages")
                else ""}


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="refund-agent-worker", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--db", required=True, help="checkpoint database (SQLite file or DSN)")
    p.add_argument("--saver", choices=("sqlite", "postgres"), default="sqlite")
    p.add_argument("--thread", required=True, help="thread id")
    p.add_argument("--durability", choices=("sync", "async", "exit"), default="async")
    p.add_argument("--version", default=VERSION, help="workflow version the worker runs")
    p.add_argument("--bypass-url", help="call this payments API directly, without the ledger")
    p.add_argument("action", choices=("start", "approve", "resume", "replay", "fork"))
    p.add_argument("--invoice", default="inv-1")
    p.add_argument("--amount", type=float, default=None)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.action == "start" and args.amount is None:
        args.amount = 125.0
    print(json.dumps(run(args)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

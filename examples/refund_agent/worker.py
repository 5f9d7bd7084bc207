"""One run of the refund agent for one thread, as a worker process would do it.

    python -m examples.refund_agent.worker --db agent.sqlite --thread t1 start \
        --invoice inv-1 --amount 125
    python -m examples.refund_agent.worker --db agent.sqlite --thread t1 approve
    python -m examples.refund_agent.worker --db agent.sqlite --thread t1 resume
    python -m examples.refund_agent.worker --db agent.sqlite --thread t1 replay
    python -m examples.refund_agent.worker --db agent.sqlite --thread t1 fork [--amount 999]
    python -m examples.refund_agent.worker --db agent.sqlite --thread t1 confirm

``--graph`` picks a variant of :mod:`examples.refund_agent.variants` (``confirm`` answers
the confirmation interrupt of ``effect-before-interrupt``).

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
from contextlib import ExitStack
from typing import Any

from langchain_core.messages import AIMessage
from langgraph.types import Command

from examples.refund_agent.approvals import sign_refund
from examples.refund_agent.variants import VARIANTS, Effects, Variant
from ledger_stream import LedgerClient
from ledger_stream.config import Settings


def _checkpointer(args: argparse.Namespace, stack: ExitStack) -> Any:
    if args.saver == "postgres":
        from langgraph.checkpoint.postgres import PostgresSaver

        saver = stack.enter_context(PostgresSaver.from_conn_string(args.db))
        saver.setup()
        return saver
    from langgraph.checkpoint.sqlite import SqliteSaver

    return SqliteSaver(sqlite3.connect(args.db, check_same_thread=False))


def _approval(settings: Settings, graph: Any, config: dict[str, Any],
              variant: Variant) -> dict[str, Any]:
    """What the approval service would sign for the refund(s) the thread is waiting on."""
    pending = graph.get_state(config).tasks[0].interrupts[0].value
    if "calls" in pending:  # several refunds in one step: one approval per invoice
        return {c["invoice"]: _sign(settings, variant.material(c["invoice"], c["amount"]))
                for c in pending["calls"]}
    args = pending["args"]
    return _sign(settings, variant.material(args["invoice"], args["amount"]))


def _sign(settings: Settings, material: dict[str, Any]) -> dict[str, Any]:
    return sign_refund(settings, material)


def _before_tools(graph: Any, config: dict[str, Any], node: str = "tools") -> dict[str, Any]:
    """The checkpoint whose next step is the tool call (time travel's usual target)."""
    for snapshot in graph.get_state_history(config):
        if node in snapshot.next:
            return dict(snapshot.config)
    raise SystemExit(f"no checkpoint before the {node} step in this thread")


def _fork(graph: Any, config: dict[str, Any], amount: float | None,
          node: str = "tools", as_node: str = "approval") -> dict[str, Any]:
    """Fork the pre-call checkpoint; with ``amount``, the model's tool call is edited."""
    before = _before_tools(graph, config, node)
    snapshot = graph.get_state(before)
    call_message = snapshot.values["messages"][-1]
    calls = [dict(c) for c in call_message.tool_calls]
    if amount is not None:
        calls[0]["args"] = {**calls[0]["args"], "amount": amount}
    edited = AIMessage(content="", tool_calls=calls, id=call_message.id)
    return dict(graph.update_state(before, {"messages": [edited]}, as_node=as_node))


def run(args: argparse.Namespace) -> dict[str, Any]:
    settings = Settings()
    with ExitStack() as stack:
        client = stack.enter_context(LedgerClient(settings)) if not args.bypass_url else None
        variant = VARIANTS[args.graph]
        effects = Effects(client, args.bypass_url, args.version or variant.version,
                          args.http_timeout)
        graph = variant.build(effects, _checkpointer(args, stack))
        node = variant.effect_node
        config: dict[str, Any] = {"configurable": {"thread_id": args.thread}}
        invoke = {"durability": args.durability}
        if args.start_at:  # line up with other workers: all read the same checkpoint
            time.sleep(max(0.0, args.start_at - time.time()))
        if args.action == "start":
            graph.invoke(variant.start_input(args.invoice, args.amount), config, **invoke)
        elif args.action == "approve":
            graph.invoke(Command(resume=_approval(settings, graph, config, variant)), config,
                         **invoke)
        elif args.action == "confirm":
            graph.invoke(Command(resume={"confirmed": True}), config, **invoke)
        elif args.action == "resume":
            graph.invoke(None, config, **invoke)
        elif args.action == "replay":
            graph.invoke(None, _before_tools(graph, config, node), **invoke)
        elif args.action == "fork":
            graph.invoke(None, _fork(graph, config, args.amount, node, variant.approval_node),
                         **invoke)
        state = graph.get_state(config)
        values = state.values or {}  # an entrypoint's are None until it returns
        return {"thread": args.thread, "ledger_receipts": values.get("ledger_receipts", {}),
                "waiting_on": list(state.next),
                "last_message": str(values["messages"][-1].content) if values.get("messages")
                else ""}


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="refund-agent-worker", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--db", required=True, help="checkpoint database (SQLite file or DSN)")
    p.add_argument("--saver", choices=("sqlite", "postgres"), default="sqlite")
    p.add_argument("--thread", required=True, help="thread id")
    p.add_argument("--durability", choices=("sync", "async", "exit"), default="async")
    p.add_argument("--graph", choices=sorted(VARIANTS), default="refund",
                   help="which variant of the agent to run")
    p.add_argument("--version", default=None,
                   help="workflow version the worker runs (default: the variant's)")
    p.add_argument("--bypass-url", help="call this payments API directly, without the ledger")
    p.add_argument("--http-timeout", type=float, default=10.0,
                   help="seconds the bypassed tool waits for the payments API")
    p.add_argument("--start-at", type=float, default=None,
                   help="UNIX time to start the action at (lines up concurrent workers)")
    p.add_argument("action",
                   choices=("start", "approve", "resume", "replay", "fork", "confirm"))
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

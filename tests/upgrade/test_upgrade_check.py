"""The upgrade check without a broker: real refund-agent graphs on a real SqliteSaver, the
ledger behind its interface (a store of key states that the decision core itself updates).

v1 threads are left where a deploy finds them: one waiting for its approval, one killed
after its refund intent was recorded (its refund step pending), one done. Each upgrade of
examples/refund_agent is then checked against them."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.types import Command

from examples.refund_agent.graph import refund_args
from ledger_stream import LedgerClient, args_hash
from ledger_stream.domain import events as ev
from ledger_stream.sdk.dry_run import DryRunViolation, dry_run
from ledger_stream.upgrade import Kind, check_threads
from ledger_stream.upgrade.check import LedgerProbe
from tests.upgrade.support import (
    POLICY,
    Killed,
    MemoryLedger,
    approval_for,
    graph,
    write_threads,
)

pytestmark = pytest.mark.timeout(60)

















@pytest.fixture
def world(tmp_path: Path, client: LedgerClient) -> tuple[SqliteSaver, MemoryLedger]:
    saver = SqliteSaver(sqlite3.connect(tmp_path / "agent.sqlite", check_same_thread=False))
    return saver, write_threads(saver, client)


def verdicts(world: tuple[SqliteSaver, MemoryLedger], client: LedgerClient, variant: str,
             resume: Any = None) -> dict[str, dict[Kind, list[str]]]:
    saver, ledger = world
    found = check_threads(graph(client, variant), saver, ledger, POLICY, resume=resume)
    out: dict[str, dict[Kind, list[str]]] = {}
    for v in found:
        out[v.thread_id] = {}
        for f in v.findings:
            out[v.thread_id].setdefault(f.kind, []).append(f.key or f.node)
    return out


def test_the_world_is_as_a_deploy_finds_it(world):
    saver, ledger = world
    assert [i.key for i in ledger.intents] == ["acme/refund/inv-pending", "acme/refund/inv-done"]
    assert ledger.states["acme/refund/inv-pending"].args_hash == args_hash(
        refund_args("inv-pending", 12.5))


def test_a_safe_upgrade_is_safe(world, client):
    found = verdicts(world, client, "refund-v1.1")
    assert set(found) == {"waiting", "pending"}  # done is not in flight
    assert found["pending"] == {Kind.SAFE: ["acme/refund/inv-pending"]}
    assert found["waiting"] == {Kind.WAITING: ["approval"]}


def test_a_safe_upgrade_past_the_approval_makes_the_waiting_threads_refund(world, client):
    found = verdicts(world, client, "refund-v1.1", resume=approval_for)
    assert found["waiting"] == {Kind.NEW_EFFECT: ["acme/refund/inv-waiting"]}


def test_a_renamed_node_drops_the_pending_refund_and_orphans_its_intent(world, client):
    found = verdicts(world, client, "refund-v2-renamed", resume=approval_for)
    assert found["pending"] == {Kind.DROPPED_TASK: ["tools"],
                                Kind.ORPHAN: ["acme/refund/inv-pending"]}
    assert found["waiting"] == {Kind.NEW_EFFECT: ["acme/refund/inv-waiting"]}


def test_an_amount_rule_change_is_a_conflict_and_breaks_the_approval(world, client):
    found = verdicts(world, client, "refund-v2-amounts", resume=approval_for)
    assert found["pending"] == {Kind.CONFLICT: ["acme/refund/inv-pending"]}
    # The approval binds the arguments the human saw; v2 submits others: rejected.
    assert found["waiting"] == {Kind.REJECTED: ["acme/refund/inv-waiting"]}


def test_the_check_writes_nothing_to_the_checkpointer_or_the_ledger(world, client):
    saver, ledger = world
    before = saver.conn.execute("SELECT COUNT(*) FROM checkpoints").fetchone()[0]
    writes = saver.conn.execute("SELECT COUNT(*) FROM writes").fetchone()[0]
    intents = len(ledger.intents)
    verdicts(world, client, "refund-v2", resume=approval_for)
    assert saver.conn.execute("SELECT COUNT(*) FROM checkpoints").fetchone()[0] == before
    assert saver.conn.execute("SELECT COUNT(*) FROM writes").fetchone()[0] == writes
    assert len(ledger.intents) == intents


def test_producing_during_a_dry_run_is_refused(client):
    intent = client.intent("acme/refund/inv-9", "refund", "payments", {"a": 1},
                           workflow=ev.Workflow("g", "1", "t", "n"))
    with dry_run(LedgerProbe(MemoryLedger(), POLICY)), pytest.raises(DryRunViolation):
        client._produce(intent)


def test_the_probe_answers_a_second_ask_of_a_key_as_a_duplicate(client):
    probe = LedgerProbe(MemoryLedger(), POLICY)
    intent = client.intent("acme/mail/m-1", "mail", "smtp", {"to": "x"},
                           workflow=ev.Workflow("g", "1", "t", "n"))
    first = probe.answer(intent)
    again = probe.answer(client.intent("acme/mail/m-1", "mail", "smtp", {"to": "x"},
                                       workflow=ev.Workflow("g", "1", "t", "n")))
    assert first.status is ev.ReceiptStatus.ACCEPTED
    assert (again.status, again.intent_event_id) == (ev.ReceiptStatus.ACCEPTED,
                                                       again.intent_event_id)
    assert [a.state.phase.value for a in probe.asked] == ["absent", "reserved"]


def test_new_code_that_raises_is_an_error_finding(world, client, monkeypatch):
    import examples.refund_agent.graph as g

    def broken(_invoice: str, _amount: float) -> dict[str, Any]:
        raise ValueError("amount rule failed")

    monkeypatch.setattr(g, "refund_args", broken)
    found = verdicts(world, client, "refund-v1.1")
    assert Kind.ERROR in found["pending"]
    assert found["pending"][Kind.ORPHAN] == ["acme/refund/inv-pending"]


class KillSecond:
    """Two parallel refund tasks: the worker dies right after the second intent, once the
    first task's writes are saved (``saved``; a fixed pause lost that race under load)."""

    def __init__(self, ledger: MemoryLedger, saved: Any) -> None:
        self.ledger, self.n, self.saved = ledger, 0, saved
        self.killed = ""  # the key of the task that dies
        # The tasks answer in threads of their own: recording and counting go together, or
        # the task counted second may be the one recorded first.
        self.lock = threading.Lock()

    def answer(self, intent: ev.Intent) -> ev.Receipt:
        with self.lock:
            receipt = self.ledger.record(intent)
            self.n += 1
            second = self.n == 2
        if second:
            self.killed = intent.key
            deadline = time.monotonic() + 30
            while not self.saved() and time.monotonic() < deadline:
                time.sleep(0.05)
            raise Killed
        return receipt


def test_a_parallel_task_that_finished_is_not_an_orphan(tmp_path, client):
    """Of two parallel refund tasks, one finished (its receipt is in the step's saved
    writes) and one was killed after its intent: resuming runs only the second again."""
    saver = SqliteSaver(sqlite3.connect(tmp_path / "agent.sqlite", check_same_thread=False))
    ledger = MemoryLedger()
    v1 = graph(client, "parallel", saver)
    config = {"configurable": {"thread_id": "par"}}
    v1.invoke({"invoice": "inv-p", "amount": 5.0, "messages": []}, config)
    approvals = {f"inv-p-{part}": approval_for("par", {"args": {
        "invoice": f"inv-p-{part}", "amount": 5.0}}) for part in ("a", "b")}
    def first_task_saved() -> bool:
        found = saver.get_tuple(config)
        return bool(found and any(not channel.startswith("__")
                                  for _, channel, _ in found.pending_writes or []))

    killer = KillSecond(ledger, first_task_saved)
    with dry_run(killer), pytest.raises(Killed):
        v1.invoke(Command(resume=approvals), config, durability="sync")
    assert len(ledger.intents) == 2 and killer.killed
    found = check_threads(graph(client, "parallel"), saver, ledger, POLICY)
    (only,) = found
    # Only the killed task runs again: its key is asked once more (safe), the other's not.
    assert [(f.kind, f.key) for f in only.findings] == [(Kind.SAFE, killer.killed)]


@pytest.mark.postgres
def test_threads_in_a_postgres_checkpointer(postgres_dsn, client):
    from langgraph.checkpoint.postgres import PostgresSaver

    with PostgresSaver.from_conn_string(postgres_dsn) as saver:
        saver.setup()
        ledger = write_threads(saver, client)
        assert verdicts((saver, ledger), client, "refund-v2-renamed") == {
            "waiting": {Kind.WAITING: ["approval"]},
            "pending": {Kind.DROPPED_TASK: ["tools"], Kind.ORPHAN: ["acme/refund/inv-pending"]}}
        assert verdicts((saver, ledger), client, "refund-v1.1")["pending"] == {
            Kind.SAFE: ["acme/refund/inv-pending"]}


def test_a_submit_from_outside_the_dry_runs_context_is_refused_in_the_check(client,
                                                                            monkeypatch):
    """A tool that submits from a thread of its own escapes the dry run's context; the
    check's process forbids producing anyway (upgrade-check sets it before loading code)."""
    import threading

    from ledger_stream.kafka import producer

    monkeypatch.setattr(producer, "_forbidden", "")
    producer.forbid_producing("upgrade-check is a dry run")
    intent = client.intent("acme/refund/inv-9", "refund", "payments", {"a": 1},
                           workflow=ev.Workflow("g", "1", "t", "n"))
    raised: list[BaseException] = []

    def escape() -> None:
        try:
            client.submit(intent, 0.1)
        except BaseException as exc:  # noqa: BLE001 - the test inspects it
            raised.append(exc)

    with dry_run(LedgerProbe(MemoryLedger(), POLICY)):
        worker = threading.Thread(target=escape)  # a plain thread: no copied context
        worker.start()
        worker.join(10)
    assert len(raised) == 1 and isinstance(raised[0], producer.ProducingForbidden), raised

"""``ledger-stream upgrade-check`` on the real thing: the refund agent's worker processes on
a SQLite checkpointer, a processor on a real broker, the CLI reading the ledger's changelog
and intents. One v1 thread waits for its approval, one was killed right after its refund
intent was recorded; the three upgrades of examples/refund_agent/upgrades.py are checked."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from langgraph.checkpoint.sqlite import SqliteSaver

from examples.refund_agent.graph import refund_args
from examples.refund_agent.upgrades import approve
from examples.refund_agent.variants import VARIANTS, Effects
from ledger_lab.harness.agents import AgentWorld, agent_world
from ledger_lab.harness.approvers import TEST_APPROVER, trusted, write_signing_key
from ledger_lab.harness.processes import processor_group
from ledger_stream import LedgerClient, args_hash
from ledger_stream.config import Settings
from ledger_stream.domain import events as ev
from ledger_stream.domain.policy import Policy
from ledger_stream.kafka.reader import read_topic
from ledger_stream.serde import AvroCodec
from ledger_stream.upgrade import KafkaLedger, check_threads

pytestmark = pytest.mark.timeout(240)
UPGRADES = "examples.refund_agent.upgrades"


@pytest.fixture
def world(ledger_topics: Settings, tmp_path: Path) -> Iterator[AgentWorld]:
    with agent_world(ledger_topics, tmp_path) as w:
        w.stop_connector()  # the killed thread's refund stays in flight
        yield w


def findings(done) -> dict[str, dict[str, list[str]]]:
    out: dict[str, dict[str, list[str]]] = {}
    for thread in done.output["threads"]:
        kinds = out.setdefault(thread["thread"], {})
        for f in thread["findings"]:
            kinds.setdefault(f["kind"], []).append(f["key"] or f["node"])
    return out


def test_upgrade_check_against_the_ledger(world: AgentWorld, monkeypatch):
    for thread, invoice in (("waiting", "inv-w"), ("pending", "inv-p")):
        assert world.worker(thread, "start", "--invoice", invoice, "--amount", "12.5"
                            ).returncode == 0
    killed = world.worker("pending", "approve", failpoint="after_intent")
    assert killed.returncode != 0, killed.log
    pending_key = "acme/refund/inv-p"
    reserved = world.stack.await_key(pending_key, {ev.ReceiptStatus.ACCEPTED})
    assert reserved.args_hash == args_hash(refund_args("inv-p", 12.5))

    renamed = world.upgrade_check(f"{UPGRADES}:refund_v2_renamed", "pending")
    assert renamed.returncode == 1, renamed.log
    # The orphan is the intent the ledger holds from the pending step (the intents topic).
    assert findings(renamed) == {"pending": {"dropped_task": ["tools"],
                                             "orphan": [pending_key]}}

    # The other two in this process (the same check, without a second interpreter's start).
    # approve() signs as the approval service, with the approver key; checks hold public keys.
    monkeypatch.setenv("LEDGER_APPROVAL_SIGNING_KEY",
                       str(write_signing_key(TEST_APPROVER, world.stack.tmp)))
    settings = world.stack.settings.model_copy(
        update={"consumer_group": processor_group(world.stack.settings)})
    ledger = KafkaLedger(settings, world.stack.bootstrap, AvroCodec())
    policy = Policy(approval_keys=trusted(TEST_APPROVER),
                    approval_required_actions=frozenset({"refund"}))
    saver = SqliteSaver(sqlite3.connect(world.db, check_same_thread=False))
    with LedgerClient(settings) as client:
        def check(variant: str) -> dict[str, dict[str, list[str]]]:
            chosen = VARIANTS[variant]
            graph = chosen.build(Effects(client, None, chosen.version), None)
            return {v.thread_id: {k.value: keys for k, keys in _kinds(v).items()}
                    for v in check_threads(graph, saver, ledger, policy, resume=approve)}

        assert check("refund-v2-amounts") == {
            "pending": {"conflict": [pending_key]},  # the key's state, from the changelog
            "waiting": {"rejected": ["acme/refund/inv-w"]}}  # the approval binds 1.x's args
        assert check("refund-v1.1") == {"pending": {"safe": [pending_key]},
                                        "waiting": {"new_effect": ["acme/refund/inv-w"]}}
    assert world.sandbox.ledger()["effects"] == []  # nothing was applied by the checks
    assert [i.workflow.version for i in _intents(world)] == ["1.0"]  # nor submitted

    # A processor that is not deciding: the check sees the intents it has not decided.
    assert ledger.undecided() == 0
    world.stack.processor.stop()
    with LedgerClient(settings) as client:
        client._produce(client.intent("acme/refund/inv-late", "refund", "payments", {"a": 1},
                                      workflow=ev.Workflow("g", "1", "t", "n")))
    assert ledger.undecided() == 1
    # Waiting for what was recorded before a check: intents after it are not counted, so a
    # check under steady traffic can end (a hostile review: drain never did).
    ends = ledger.intent_ends()
    with LedgerClient(settings) as client:
        client._produce(client.intent("acme/refund/inv-later", "refund", "payments", {"a": 1},
                                      workflow=ev.Workflow("g", "1", "t", "n")))
    assert (ledger.undecided(ends), ledger.undecided()) == (1, 2)
    # A transaction's marker and an aborted record take offsets nobody commits past (an
    # exactly-once processor forwards intents in transactions): they are not intents.
    from confluent_kafka import Producer

    txn = Producer({"bootstrap.servers": world.stack.bootstrap,
                    "transactional.id": f"test-abort-{time.monotonic_ns()}"})
    txn.init_transactions(30)
    txn.begin_transaction()
    with LedgerClient(settings) as client:
        aborted = AvroCodec().encode(client.intent(
            "acme/refund/inv-aborted", "refund", "payments", {"a": 1},
            workflow=ev.Workflow("g", "1", "t", "n")))
    txn.produce(settings.topic("intents"), aborted, b"acme/refund/inv-aborted", partition=0)
    assert txn.flush(30) == 0  # on the broker: the abort then writes its marker too
    txn.abort_transaction(30)
    assert ledger.undecided() == 2


def _kinds(verdict) -> dict:
    out: dict = {}
    for f in verdict.findings:
        out.setdefault(f.kind, []).append(f.key or f.node)
    return out


def _intents(world: AgentWorld) -> list[ev.Intent]:
    return read_topic(world.stack.bootstrap, world.stack.settings.topic("intents"))

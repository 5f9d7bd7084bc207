"""Containment end to end on the real broker: ``ledger-stream freeze`` holds every new
refund of one tenant (recorded, answered ``held: frozen``, nothing reaches the payments
sandbox, even across a SIGKILL of the processor), other tenants go on, and ``unfreeze``
releases the held keys, each applied once. Effects are read from the sandbox's own ledger."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from ledger_lab.harness.processes import processor_group
from ledger_lab.harness.sandbox import SandboxProc
from ledger_lab.harness.stack import Stack
from ledger_stream.cli.main import main
from ledger_stream.config import Settings
from ledger_stream.domain import events as ev
from ledger_stream.kafka.exceptions import DeliveryFailed
from ledger_stream.kafka.partitioner import partition_for
from ledger_stream.operate import Actor, containment
from ledger_stream.processor.step import PARTITIONED
from ledger_stream.serde import AvroCodec
from tests.processor.support import read_raw

OPS = Actor.from_cli("ops")

pytestmark = pytest.mark.timeout(240)

ARGS = {"amount": 4200, "currency": "EUR", "to": "cust-7"}
HELD = {ev.ReceiptStatus.HELD}
SUCCEEDED = {ev.ReceiptStatus.SUCCEEDED}


def cli(stack: Stack, *argv: str) -> int:
    group = ["--group", processor_group(stack.settings)] \
        if argv[0] in ("freeze", "unfreeze") else []
    return main([*argv, "--bootstrap", stack.bootstrap,
                 "--topic-prefix", stack.settings.topic_prefix, *group])


def test_a_freeze_holds_a_tenants_refunds_across_a_restart_and_the_unfreeze_releases_them(
        stack: Stack, sandbox: SandboxProc, capsys: pytest.CaptureFixture[str]) -> None:
    stack.connector("http", "--name", "sandbox", "--base-url", sandbox.url, "--deduplicates")
    run = uuid.uuid4().hex[:6]
    warm = f"acme/refund/{run}-warm"
    stack.submit(warm, ARGS, "sandbox")
    stack.await_key(warm, SUCCEEDED)

    assert cli(stack, "freeze", "refund", "--tenant", "acme", "--reason", "incident 7",
               "--operator", "ops-ann") == 0
    # It returns once every partition's processor applied it: the next intents are held.
    assert "acme/refund: frozen (hold) in 3 partition(s), in force" in \
        capsys.readouterr().out

    held = [f"acme/refund/{run}-{i}" for i in range(6)]
    intents = [stack.submit(key, ARGS, "sandbox") for key in held[:3]]
    for intent in intents:
        answer = stack.await_answer(intent)
        assert (answer.status, answer.reason) == (ev.ReceiptStatus.HELD, ev.Reason.FROZEN)
    other = f"beta/refund/{run}"
    stack.submit(other, ARGS, "sandbox")
    stack.await_key(other, SUCCEEDED)  # another tenant is not frozen

    stack.restart_processor(kill=True)  # the freeze is state: it survives a SIGKILL
    for key in held[3:]:
        stack.submit(key, ARGS, "sandbox")
    for key in held:
        stack.await_key(key, HELD, timeout_s=90)
    stack.submit(held[0], ARGS, "sandbox")  # a resumed worker's duplicate: still held
    time.sleep(2)  # a connector that got a dispatch would have called by now
    assert [sandbox.effects(key) for key in held] == [[]] * len(held)

    assert cli(stack, "freezes", "--json") == 0
    (listed,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert (listed["scope"], listed["mode"], listed["operator"], listed["reason"]) == (
        "acme/refund", "hold", "ops-ann", "incident 7")

    assert cli(stack, "unfreeze", "refund", "--tenant", "acme") == 0
    for key in held:
        receipt = stack.await_key(key, SUCCEEDED, timeout_s=90)
        (effect,) = sandbox.effects(key)
        assert receipt.external_id == effect["id"]
    assert cli(stack, "freezes") == 0
    assert "0 freeze(s) in force" in capsys.readouterr().err

    # Each partition released its keys in the order it held them.
    codec = AvroCodec()
    dispatched = [codec.decode(r.value) for r in read_raw(stack.bootstrap,
                                                           stack.settings.topic("dispatch"))]
    firsts = [d.key for d in dispatched if isinstance(d, ev.Dispatch) and d.key in held]
    for partition in range(3):
        mine = [k for k in held if partition_for(k.encode(), 3) == partition]
        assert [k for k in firsts if k in mine] == mine

    # The audit trail: both commands, one copy per partition, each naming its partition.
    copies = [r for r in read_raw(stack.bootstrap, stack.settings.topic("attempts"))
              if (r.key or b"").startswith(b"~containment/")]
    events = [codec.decode(r.value) for r in copies]
    assert all(isinstance(e, PARTITIONED) for e in events)
    assert sorted((e.frozen, e.partition) for e in events) == sorted(
        (frozen, p) for frozen in (True, False) for p in range(3))

    # An unfreeze run again with its --event-id (its first try timed out) after a colleague
    # froze again: every processor applied that id already, so the new freeze holds.
    capsys.readouterr()
    assert cli(stack, "freeze", "refund", "--tenant", "acme", "--reason", "again") == 0
    assert cli(stack, "unfreeze", "refund", "--tenant", "acme", "--event-id", f"u-{run}") == 0
    assert cli(stack, "freeze", "refund", "--tenant", "acme", "--reason", "third") == 0
    capsys.readouterr()
    assert cli(stack, "unfreeze", "refund", "--tenant", "acme", "--event-id", f"u-{run}") == 0
    assert "A retry: a processor that applied this command before ignores it" in \
        capsys.readouterr().out
    late = f"acme/refund/{run}-late"
    answer = stack.await_answer(stack.submit(late, ARGS, "sandbox"))
    assert (answer.status, answer.reason) == (ev.ReceiptStatus.HELD, ev.Reason.FROZEN)
    assert cli(stack, "freezes", "--json") == 0
    (listed,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert (listed["scope"], listed["reason"]) == ("acme/refund", "third")
    assert cli(stack, "freezes", "--history", "--json") == 0
    history = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(h["event_id"], h["ignored"]) for h in history][-3:] == \
        [(f"u-{run}", ""), (listed["event_id"], ""), (f"u-{run}", "repeat")]
    assert cli(stack, "unfreeze", "refund", "--tenant", "acme") == 0
    stack.await_key(late, SUCCEEDED, timeout_s=90)
    assert len(sandbox.effects(late)) == 1

    # No processor to apply it: recorded, and the command says it is not in force yet.
    stack.processor.stop()
    capsys.readouterr()
    assert cli(stack, "freeze", "refund", "--reason", "later", "--wait", "1") == 1
    assert "have not applied it within 1 s" in capsys.readouterr().out


def test_freeze_refuses_a_bad_action_and_needs_a_reason(
        ledger_topics, capsys: pytest.CaptureFixture[str]) -> None:
    s = ledger_topics
    base = ["--bootstrap", s.kafka_bootstrap, "--topic-prefix", s.topic_prefix]
    assert main(["freeze", "re/fund", "--reason", "x", *base]) == 2
    assert "action 're/fund'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["freeze", "refund", *base])
    assert "--reason" in capsys.readouterr().err


def test_a_command_whose_transaction_fails_is_in_no_partition_and_its_retry_is_sent(
        ledger_topics: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every copy reaches the broker, then the commit fails: the transaction is aborted, so
    no partition's processor (a read-committed reader) sees the command, and a retry with
    the same event id is a first application everywhere (not a repeat in some partitions
    and a new command in others, as copies sent to some partitions only would be)."""
    s = ledger_topics
    assert s.kafka_bootstrap

    class CommitFails(containment.Producer):
        def commit_transaction(self, *args: Any) -> None:
            assert self.flush(10) == 0  # every copy is on the broker, in the transaction
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "injected"))

    monkeypatch.setattr(containment, "Producer", CommitFails)
    with pytest.raises(DeliveryFailed, match="was aborted: no partition has it"):
        containment.send(s, s.kafka_bootstrap, AvroCodec(), action="refund", tenant="acme",
                         frozen=True, reason="incident 9", actor=OPS, event_id="f-9")
    consumer = Consumer({"bootstrap.servers": s.kafka_bootstrap, "group.id": "t-watermarks",
                         "isolation.level": "read_uncommitted"})  # what was written
    try:
        for p in range(s.partitions):
            _, high = consumer.get_watermark_offsets(
                TopicPartition(s.topic("attempts"), p), timeout=10)
            assert high >= 1, p  # the copy was written (then aborted)
    finally:
        consumer.close()
    assert containment.log(s, s.kafka_bootstrap, AvroCodec()) == []

    monkeypatch.undo()
    _, offsets = containment.send(s, s.kafka_bootstrap, AvroCodec(), action="refund",
                                  tenant="acme", frozen=True, reason="incident 9",
                                  actor=OPS, event_id="f-9")
    assert sorted(offsets) == list(range(s.partitions))
    (record,) = containment.log(s, s.kafka_bootstrap, AvroCodec())
    assert (record.event.event_id, record.scope) == ("f-9", "acme/refund")

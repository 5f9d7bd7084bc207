"""``ledger-stream drain`` end to end on the real broker, processor, connector and payments
sandbox: with two workflow versions in flight it lists exactly the in-flight keys of the
version asked (exit 1; 0 once none is); while the processors' group has not decided every
recorded intent, it is not drained (exit 1); ``--hold`` holds a new intent of that version
(answered ``held``, nothing at the sandbox, listed apart: exit 0 once only held keys are
left) while another version's is paid and the keys already in flight under it finish;
``--release`` lets the held one through, paid once. Effects are read from the sandbox's
own ledger."""

from __future__ import annotations

import json
import time
import uuid

import pytest

from ledger_lab.harness.processes import processor_group
from ledger_lab.harness.sandbox import SandboxProc
from ledger_lab.harness.stack import Stack
from ledger_stream.cli.main import main
from ledger_stream.domain import events as ev
from ledger_stream.domain.keys import args_hash, canonical_json
from ledger_stream.serde import AvroCodec
from tests.processor.support import read_raw

pytestmark = pytest.mark.timeout(300)

ARGS = {"amount": 1500, "currency": "EUR", "to": "cust-9"}
SUCCEEDED = {ev.ReceiptStatus.SUCCEEDED}
GRAPH = "refund-agent"


def _submit(stack: Stack, key: str, version: str, target: str) -> ev.Intent:
    intent = ev.Intent(
        event_id=uuid.uuid4().hex, key=key, tenant=key.split("/", 1)[0],
        action=key.split("/")[1], target=target, args_json=canonical_json(ARGS),
        args_hash=args_hash(ARGS), workflow=ev.Workflow(GRAPH, version, "thread-1"),
        at_ms=int(time.time() * 1000))
    stack.producer.send("intents", intent)
    stack.producer.flush()
    return intent


def _drain(stack: Stack, capsys: pytest.CaptureFixture[str], version: str, *flags: str
           ) -> tuple[int, list[dict[str, object]]]:
    capsys.readouterr()
    status = main(["drain", "--graph", GRAPH, "--version", version, "--json", *flags,
                   "--bootstrap", stack.bootstrap,
                   "--topic-prefix", stack.settings.topic_prefix,
                   "--group", processor_group(stack.settings)])
    return status, [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def test_drain_lists_a_versions_keys_in_flight_and_holds_its_new_intents(
        stack: Stack, sandbox: SandboxProc, capsys: pytest.CaptureFixture[str]) -> None:
    stack.connector("http", "--name", "sandbox", "--base-url", sandbox.url, "--deduplicates")
    run = uuid.uuid4().hex[:6]
    settled = f"acme/refund/{run}-v1-done"
    stack.await_answer(_submit(stack, settled, "1.0", "sandbox"))
    stack.await_key(settled, SUCCEEDED)
    # Target "later" has no connector yet: its keys stay dispatched, in flight.
    v1 = [f"acme/refund/{run}-v1-{i}" for i in range(2)]
    v2 = [f"beta/refund/{run}-v2-0"]
    for key, version in [(k, "1.0") for k in v1] + [(k, "2.0") for k in v2]:
        stack.await_answer(_submit(stack, key, version, "later"))

    status, listed = _drain(stack, capsys, "1.0")
    assert status == 1
    assert [(k["key"], k["phase"]) for k in listed] == [(k, "reserved") for k in sorted(v1)]
    status, listed = _drain(stack, capsys, "2.0")
    assert (status, [k["key"] for k in listed]) == (1, v2)
    assert _drain(stack, capsys, "0.9") == (0, [])
    # A group that has decided none of the recorded intents: an intent of 0.9 may be among
    # them, in no changelog row yet. Not drained, whatever the changelog says.
    assert main(["drain", "--graph", GRAPH, "--version", "0.9", "--lag-wait", "0",
                 "--bootstrap", stack.bootstrap, "--topic-prefix", stack.settings.topic_prefix,
                 "--group", f"behind-{run}"]) == 1
    shown = capsys.readouterr()
    assert shown.out == "" and "not drained: the processor has" in shown.err

    # Hold 2.0: a new 2.0 intent is held, a 1.0 one is paid, the 2.0 key in flight finishes.
    assert _drain(stack, capsys, "2.0", "--hold", "--reason", "deploy 3.0")[0] == 1
    new_v2 = f"beta/refund/{run}-v2-new"
    answer = stack.await_answer(_submit(stack, new_v2, "2.0", "sandbox"))
    assert (answer.status, answer.reason) == (ev.ReceiptStatus.HELD, ev.Reason.FROZEN)
    new_v1 = f"beta/refund/{run}-v1-new"
    _submit(stack, new_v1, "1.0", "sandbox")
    stack.await_key(new_v1, SUCCEEDED)
    stack.connector("http", "--name", "later", "--base-url", sandbox.url, "--deduplicates")
    for key in v1 + v2:
        stack.await_key(key, SUCCEEDED, timeout_s=90)
        assert len(sandbox.effects(key)) == 1
    time.sleep(2)  # a connector that got a dispatch for it would have called by now
    assert sandbox.effects(new_v2) == []
    # Only the held key is left: drained (it waits for the release), listed apart.
    status, listed = _drain(stack, capsys, "2.0")
    assert (status, [(k["key"], k["phase"], k["in_flight"]) for k in listed]) == (
        0, [(new_v2, "held", False)])
    assert main(["drain", "--graph", GRAPH, "--version", "2.0", "--bootstrap",
                 stack.bootstrap, "--topic-prefix", stack.settings.topic_prefix,
                 "--group", processor_group(stack.settings)]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].startswith(f"{new_v2}\theld\tattempt 1\tsince ")
    assert table[0].endswith("frozen: deploy 3.0")
    assert table[1:] == [f"0 key(s) in flight for {GRAPH} version 2.0",
                         f"1 key(s) held for {GRAPH} version 2.0: they wait for the release"]
    assert _drain(stack, capsys, "1.0") == (0, [])

    # The release dispatches the held intent, once; then the version is drained.
    assert _drain(stack, capsys, "2.0", "--release")[0] in (0, 1)
    receipt = stack.await_key(new_v2, SUCCEEDED, timeout_s=90)
    (effect,) = sandbox.effects(new_v2)
    assert receipt.external_id == effect["id"]
    assert _drain(stack, capsys, "2.0") == (0, [])

    # Both commands are in the audit trail, under the version's scope.
    codec = AvroCodec()
    audit = [codec.decode(r.value) for r in read_raw(stack.bootstrap,
                                                      stack.settings.topic("audit"))]
    mine = [(a.action, a.key) for a in audit if isinstance(a, ev.AuditRecord)]
    scope = f"~freeze/@version/{GRAPH}/2.0"
    assert mine == [(ev.AuditAction.FREEZE, scope), (ev.AuditAction.UNFREEZE, scope)]


def test_drain_refuses_a_graph_a_version_freeze_cannot_name(
        ledger_topics, capsys: pytest.CaptureFixture[str]) -> None:
    s = ledger_topics
    status = main(["drain", "--graph", "a/b", "--version", "1", "--hold",
                   "--topic-prefix", s.topic_prefix, "--bootstrap", s.kafka_bootstrap])
    assert status == 2
    assert "graph cannot hold '/'" in capsys.readouterr().err


def test_a_hold_is_refused_while_this_process_writes_an_older_releases_schemas(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The 0.1.0 Containment schema has no graph or version: written in it, a hold would
    reach the processors as a freeze naming nothing (refused as poison) while the command
    reported it in force. Refused before anything is sent or audited."""
    from ledger_stream.config import Settings
    from ledger_stream.operate import Actor, containment
    from ledger_stream.serde import SchemaSet

    def no_kafka(*_: object) -> int:
        raise AssertionError("nothing may be sent")

    monkeypatch.setattr(containment, "_partitions", no_kafka)
    monkeypatch.setattr(containment.audit, "record", no_kafka)
    release = AvroCodec(SchemaSet.load(write_release="0.1.0"))
    with pytest.raises(containment.ContainmentRefused, match="LEDGER_WRITE_SCHEMAS"):
        containment.send(Settings(), "localhost:1", release, action="", tenant="",
                         frozen=True, actor=Actor.from_cli("ops"),
                         workflow=(GRAPH, "2.0"))

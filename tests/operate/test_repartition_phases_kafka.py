"""The operator's growth scenario on a real broker, 12 to 24 partitions, with keys in every
phase before the migration: succeeded; dispatched with no connector running (a stall
deadline pending); waiting for an operator (an unknown outcome at a target with no lookup);
sealed (past the replay window). After ``repartition --to 24`` every key asked again,
unchanged, is answered from its original state; the pending deadlines fire at the keys' new
partitions; the operator's decision still settles its keys. The target's own request log
counts one call per key: a target that does not deduplicate would hold one effect each."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from ledger_lab.harness.processes import Proc, processor_group
from ledger_lab.harness.sandbox import SandboxProc
from ledger_lab.harness.stack import Stack
from ledger_stream.config import Settings
from ledger_stream.domain import events as ev
from ledger_stream.kafka.layout import Layout, read_layout
from ledger_stream.kafka.partitioner import partition_for
from tests.operate.test_repartition_kafka import deciding_intents, run_repartition
from tests.processor.support import read_all, read_raw

pytestmark = [pytest.mark.timeout(420)]

FROM, TO = 12, 24
ARGS = {"amount": 5}
SUCCEEDED = {ev.ReceiptStatus.SUCCEEDED}
WAITS = {ev.ReceiptStatus.NEEDS_RECONCILIATION}
SEAL_MS = 2_000  # the replay window while the sealed keys are decided
QUIET_MS = 600_000  # no stall before the migration: the deadline stays pending across it
STALL_MS = 2_000  # after it: the pending stall falls due at once at the new partition


def phase_keys(phase: str, moved: int = 3, kept: int = 1) -> list[str]:
    """Keys of ``phase``: ``moved`` whose partition changes from 12 to 24, ``kept`` not."""
    found: dict[bool, list[str]] = {True: [], False: []}
    i = 0
    while len(found[True]) < moved or len(found[False]) < kept:
        key = f"acme/refund/{phase}-{i}"
        found[partition_for(key, FROM) != partition_for(key, TO)].append(key)
        i += 1
    return found[True][:moved] + found[False][:kept]


DONE, WAITING, OPERATOR, SEALED = (phase_keys(p) for p in ("done", "wait", "operator",
                                                             "sealed"))


@pytest.fixture
def ledger_settings(kafka_bootstrap: str) -> Settings:
    """This module's topics have the operator's 12 partitions (conftest's has 3)."""
    import uuid

    return Settings(kafka_bootstrap=kafka_bootstrap, topic_prefix=f"t-{uuid.uuid4().hex[:8]}",
                    partitions=FROM, replication_factor=1)


def submit_all(stack: Stack, keys: list[str], target: str) -> dict[str, ev.Intent]:
    intents = {k: stack.submit_nowait(k, ARGS, target) for k in keys}
    stack.producer.flush()
    return intents


def restart(stack: Stack, **env: int) -> None:
    stack.processor_env = {k: str(v) for k, v in env.items()}
    stack.restart_processor(kill=False)


def await_sealed(stack: Stack, keys: list[str], timeout_s: float = 60.0) -> None:
    """Ask again until each key is answered as sealed (its seal deadline has fired)."""
    deadline = time.monotonic() + timeout_s
    waiting = set(keys)
    while waiting:
        for key, intent in submit_all(stack, sorted(waiting), "payments").items():
            if stack.await_answer(intent).reason is ev.Reason.EXPIRED_KEY:
                waiting.discard(key)
        assert time.monotonic() < deadline, f"never sealed: {waiting}"
        time.sleep(1)


def resolve_applied(stack: Stack, key: str, attempt: int, external_id: str) -> Proc:
    return Proc(["reconcile", "resolve", key, "--applied", external_id, "--attempt",
                 str(attempt), "--reason", "found in the target's ledger", "--bootstrap",
                 stack.bootstrap, "--topic-prefix", stack.settings.topic_prefix],
                stack.tmp / f"resolve-{key.rsplit('/')[-1]}.log")


def test_grow_12_to_24_with_keys_in_every_phase(ledger_topics: Settings,
                                                tmp_path: Path) -> None:
    settings = ledger_topics.model_copy(
        update={"consumer_group": processor_group(ledger_topics)})
    bootstrap = settings.kafka_bootstrap or ""
    sandbox = SandboxProc(tmp_path / "sandbox.db")
    payments = ("--name", "payments", "--base-url", sandbox.url)  # no --deduplicates
    stack = Stack(settings, tmp_path, processor_env={"LEDGER_REPLAY_WINDOW_MS": str(SEAL_MS),
                                                     "LEDGER_STALL_AFTER_MS": str(QUIET_MS)})
    try:
        connector = stack.connector("http", *payments)
        # Sealed: succeeded, then past a short replay window.
        for key in SEALED:
            stack.await_answer(stack.submit(key, ARGS, "payments"))
        for key in SEALED:
            stack.await_key(key, SUCCEEDED)
        await_sealed(stack, SEALED)
        restart(stack, LEDGER_STALL_AFTER_MS=QUIET_MS)  # the default replay window from now
        # Succeeded.
        submit_all(stack, DONE, "payments")
        done = {k: stack.await_key(k, SUCCEEDED) for k in DONE}
        # Dispatched, no connector for "later": its stall deadline is pending.
        for intent in submit_all(stack, WAITING, "later").values():
            assert stack.await_answer(intent).key_status is ev.ReceiptStatus.ACCEPTED
        # Waiting for an operator: the call committed, its answer lost, and no lookup.
        for key in OPERATOR:
            sandbox.set_fault("commit_then_drop", key=key)
        blind = stack.connector("http", "--name", "blind", "--base-url", sandbox.url,
                                "--no-lookup", env={"LEDGER_CONNECTOR_LOOKUP_PATIENCE_S": "0"})
        submit_all(stack, OPERATOR, "blind")
        waiting = {k: stack.await_key(k, WAITS, timeout_s=90) for k in OPERATOR}
        alerted = {a.key for a in read_all(settings, "alerts")
                   if a.kind is ev.AlertKind.RECONCILIATION_REQUIRED}
        assert alerted >= set(OPERATOR), alerted
        for proc in (stack.processor, connector, blind):
            assert proc.stop(30) == 0, proc.tail()

        grown = run_repartition(settings, tmp_path, TO)
        assert grown.popen.returncode == 0, grown.tail()
        assert read_layout(bootstrap, settings.topic("changelog")) == Layout(TO, grown_from=FROM)

        restarted_ms = int(time.time() * 1000)
        restart(stack, LEDGER_STALL_AFTER_MS=STALL_MS)
        again = submit_all(stack, DONE + WAITING + OPERATOR + SEALED, "payments")
        again |= submit_all(stack, WAITING, "later") | submit_all(stack, OPERATOR, "blind")
        for key in DONE:
            answer = stack.await_answer(again[key], timeout_s=90)
            assert (answer.key_status, answer.external_id) \
                == (ev.ReceiptStatus.SUCCEEDED, done[key].external_id), (key, answer)
        for key in OPERATOR:
            answer = stack.await_answer(again[key])
            assert answer.key_status is ev.ReceiptStatus.NEEDS_RECONCILIATION, (key, answer)
            assert answer.attempts == waiting[key].attempts, (key, answer)
        for key in SEALED:
            answer = stack.await_answer(again[key])
            assert (answer.status, answer.reason) \
                == (ev.ReceiptStatus.REJECTED, ev.Reason.EXPIRED_KEY), (key, answer)
        for key in WAITING:
            assert stack.await_answer(again[key]).key_status is ev.ReceiptStatus.ACCEPTED

        # The operator's decision, made after the migration, settles its keys.
        effects = {k: sandbox.effects(k) for k in OPERATOR}
        resolves = [resolve_applied(stack, k, waiting[k].attempts, effects[k][0]["id"])
                    for k in OPERATOR]
        for proc in resolves:
            assert proc.popen.wait(90) == 0, proc.tail()
        for key in OPERATOR:
            settled = stack.await_key(key, SUCCEEDED)
            assert settled.external_id == effects[key][0]["id"], (key, settled)

        # The pending stall deadlines fire at the new partitions; then a connector settles
        # each waiting key with one call.
        deadline = time.monotonic() + 60
        stalled: set[str] = set()
        while set(WAITING) - stalled:
            assert time.monotonic() < deadline, (stalled, stack.processor.tail())
            time.sleep(1)
            stalled = {a.key for a in read_all(settings, "alerts")
                       if a.kind is ev.AlertKind.STALLED and a.at_ms >= restarted_ms}
        stack.connector("http", "--name", "later", "--base-url", sandbox.url)
        later = {k: stack.await_key(k, SUCCEEDED) for k in WAITING}

        # Asked once more: the original answer; and the target saw one call per key.
        final = submit_all(stack, DONE + SEALED, "payments") | submit_all(
            stack, WAITING, "later") | submit_all(stack, OPERATOR, "blind")
        expected = {**{k: r.external_id for k, r in done.items()},
                    **{k: r.external_id for k, r in later.items()},
                    **{k: effects[k][0]["id"] for k in OPERATOR}}
        for key, ext in expected.items():
            answer = stack.await_answer(final[key])
            assert (answer.key_status, answer.external_id) \
                == (ev.ReceiptStatus.SUCCEEDED, ext), (key, answer)
        for key in SEALED:
            assert stack.await_answer(final[key]).reason is ev.Reason.EXPIRED_KEY, key
        calls = [r["idempotency_key"] for r in sandbox.ledger()["requests"]]
        for key in DONE + WAITING + OPERATOR + SEALED:
            assert calls.count(key) == 1, (key, calls.count(key))
            assert len(sandbox.effects(key)) == 1, key
        assert set(deciding_intents(settings).values()) == {1}, deciding_intents(settings)
        assert not read_raw(bootstrap, settings.topic("dlq"))
    finally:
        stack.close()
        sandbox.stop()

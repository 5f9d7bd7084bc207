"""The replay-window boundary and compaction actually running, on a broker of this module's
own (its one log cleaner is not busy with other tests' topics), under a steady load of fresh
keys:

- a duplicate inside the window gets the original answer; after it, ``expired_key`` and an
  ``expired_key_reuse`` alert; neither calls the target again;
- the changelog and the history topics are compacted (short segments; the changelog without
  its one-hour lag), the processor's state folder is deleted and restored from the compacted
  changelog, and every key still answers as before: nothing lost, nothing executed twice.

Effects are counted at the payments sandbox's own request log.
"""

from __future__ import annotations

import shutil
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

from ledger_lab.falsify.evidence import read_topics
from ledger_lab.harness.sandbox import SandboxProc
from ledger_lab.harness.stack import Stack
from ledger_lab.local_kafka.ephemeral import kafka_for
from ledger_stream.config import Settings
from ledger_stream.domain import events as ev
from ledger_stream.kafka import topics
from tests.processor.support import read_raw, wait_for

pytestmark = [pytest.mark.timeout(360), pytest.mark.own_cluster]
WINDOW_MS = 12_000
FAST_COMPACTION = {"segment.ms": "200", "min.cleanable.dirty.ratio": "0.01",
                   "delete.retention.ms": "100"}


@pytest.fixture(scope="module")
def own_broker() -> Iterator[str]:
    with kafka_for(Settings(), lambda _: None) as (bootstrap, _):
        yield bootstrap


def alter(bootstrap: str, topic: str, configs: dict[str, str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource("topic", topic, incremental_configs=[
        ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
        for name, value in configs.items()])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result()


def calls(sandbox: SandboxProc, key: str) -> int:
    return sum(1 for r in sandbox.ledger()["requests"] if r["idempotency_key"] == key)


class Load(threading.Thread):
    """Fresh keys at a steady rate until stopped."""

    def __init__(self, stack: Stack) -> None:
        super().__init__(daemon=True)
        self.stack, self.keys, self.halt = stack, [], threading.Event()

    def run(self) -> None:
        while not self.halt.wait(0.1):
            key = f"acme/refund/load-{len(self.keys)}"
            self.stack.submit_nowait(key, {"amount": len(self.keys)}, "sandbox")
            self.keys.append(key)


def test_the_window_boundary_and_compaction_under_load_lose_and_repeat_nothing(
        own_broker: str, tmp_path: Path) -> None:
    settings = Settings(kafka_bootstrap=own_broker, topic_prefix=f"edge-{uuid.uuid4().hex[:6]}",
                        partitions=3, replay_window_ms=WINDOW_MS, compaction_margin_ms=0)
    topics.require_matching(topics.create_topics(own_broker, settings))
    for name in ("intents", "receipts"):
        alter(own_broker, settings.topic(name), FAST_COMPACTION)
    alter(own_broker, settings.topic("changelog"),
          {**FAST_COMPACTION, "min.compaction.lag.ms": "0"})
    env = {"LEDGER_REPLAY_WINDOW_MS": str(WINDOW_MS), "LEDGER_COMPACTION_MARGIN_MS": "0"}
    with SandboxProc(tmp_path / "sandbox.db") as sandbox:
        stack = Stack(settings, tmp_path, processor_env=env)
        load = Load(stack)
        try:
            stack.connector("http", "--name", "sandbox", "--base-url", sandbox.url)
            old = {f"acme/refund/old-{i}": i for i in range(8)}
            for key, n in old.items():
                stack.submit_nowait(key, {"amount": n}, "sandbox")
            stack.producer.flush()
            paid = {key: stack.await_key(key, {ev.ReceiptStatus.SUCCEEDED}) for key in old}
            sealed_after = time.monotonic() + WINDOW_MS / 1000
            load.start()

            # Inside the window: the original answer. All eight are sent before any answer
            # is awaited, so that on a slow machine the last is not decided past the window
            # of the first (each wait reads the receipts anew).
            again = [stack.submit_nowait(key, {"amount": n}, "sandbox")
                     for key, n in old.items()]
            stack.producer.flush()
            for key, intent in zip(old, again, strict=True):
                answer = stack.await_answer(intent)
                assert answer.status is ev.ReceiptStatus.SUCCEEDED, answer
                assert answer.external_id == paid[key].external_id

            # After it (plus the processor's clock-skew margin): expired, never new work.
            time.sleep(max(0.0, sealed_after - time.monotonic()) + 3)
            for key, n in old.items():
                answer = stack.await_answer(stack.submit(key, {"amount": n}, "sandbox"))
                assert (answer.status, answer.reason) == (ev.ReceiptStatus.REJECTED,
                                                          ev.Reason.EXPIRED_KEY), answer

            # Compaction runs: segments roll under the load, the cleaner drops old records.
            # Each old key has three intents on the topic and at least two changelog rows
            # (reserved, then succeeded): fewer of either is the cleaner's work.
            def compacted_both() -> bool:
                intents = read_topics(own_broker, [settings.topic("intents")])
                per_key = Counter(i.key for i in intents[settings.topic("intents")]
                                  if i.key in old)
                rows = Counter(r.key.decode() for r in read_raw(
                    own_broker, settings.topic("changelog")) if r.key.decode() in old)
                return min(per_key.values()) < 3 and min(rows.values()) == 1

            wait_for("the changelog and the intents to be compacted", compacted_both, 150,
                     [stack.processor], every_s=3)

            # A new machine: the state folder is gone, the compacted changelog restores it.
            stack.processor.kill()
            shutil.rmtree(tmp_path / "state")
            stack.restart_processor(kill=False)
            for key, n in old.items():
                answer = stack.await_answer(stack.submit(key, {"amount": n}, "sandbox"),
                                            timeout_s=90)
                assert answer.reason is ev.Reason.EXPIRED_KEY, answer
                assert calls(sandbox, key) == 1, key
            load.halt.set()
            load.join(10)
            for key in load.keys[-5:]:  # the newest keys: still inside their window
                stack.await_key(key, {ev.ReceiptStatus.SUCCEEDED}, timeout_s=90)
                again = stack.submit(key, {"amount": int(key.rsplit("-", 1)[1])}, "sandbox")
                assert stack.await_answer(again).status is ev.ReceiptStatus.SUCCEEDED
            for key in load.keys:
                stack.await_key(key, {ev.ReceiptStatus.SUCCEEDED}, timeout_s=90)
                assert calls(sandbox, key) == 1, key
            alerts = read_topics(own_broker, [settings.topic("alerts")])[settings.topic("alerts")]
            reused = {a.key for a in alerts if a.kind is ev.AlertKind.EXPIRED_KEY_REUSE}
            assert reused == set(old)
        finally:
            load.halt.set()
            stack.close()

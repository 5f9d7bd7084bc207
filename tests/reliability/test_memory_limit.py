"""The processor under a real kernel memory limit (a memory cgroup of its own): over the
limit the kernel kills it (SIGKILL, counted as an OOM kill by the group), and that loses
nothing; with the limit raised it starts again and works through the backlog that piled up,
inside the limit, one dispatch per key.

Effects are counted at the payments sandbox (its own ledger), dispatches and answers on the
ledger's topics. The connector runs outside the group (only the processor is limited).
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from ledger_stream.domain import events as ev
from ledger_stream.falsify.evidence import LedgerTopics
from ledger_stream.testing import cgroup
from ledger_stream.testing.sandbox import SandboxProc
from ledger_stream.testing.stack import TERMINAL, Stack

pytestmark = pytest.mark.timeout(300)
MIB = 1 << 20
BELOW_FLOOR = 40 * MIB  # less than Python, librdkafka and RocksDB need to start
WORKING = 400 * MIB
BACKLOG = 4_000


def calls(sandbox: SandboxProc, key: str) -> int:
    return sum(1 for r in sandbox.ledger()["requests"] if r["idempotency_key"] == key)


@pytest.mark.skipif(not cgroup.available(), reason="needs root and a writable memory cgroup "
                    "hierarchy (CI runs as root)")
def test_a_processor_over_its_memory_limit_is_killed_and_loses_nothing(
        ledger_topics, tmp_path: Path, sandbox: SandboxProc) -> None:
    group = cgroup.MemoryCgroup.create(BELOW_FLOOR)
    stack = Stack(ledger_topics, tmp_path, processor_cgroup=group.path)
    try:
        stack.connector("http", "--name", "sandbox", "--base-url", sandbox.url)
        paid = [stack.submit(f"acme/refund/mem-{i}", {"amount": i + 1}, "sandbox")
                for i in range(20)]
        deadline = time.monotonic() + 60
        while stack.processor.alive() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not stack.processor.alive(), "the processor runs in 40 MiB?"
        assert stack.processor.popen.returncode == -9, stack.processor.tail()
        assert group.oom_kills() >= 1  # the kernel killed it for memory, not something else
        killed = group.oom_kills()

        # While it is down, a backlog piles up: fresh keys for a target with no connector
        # (each is reserved, dispatched and answered, then waits) and a duplicate of each.
        backlog = [stack.submit_nowait(f"acme/write/backlog-{i}", {"n": i}, "nowhere")
                   for i in range(BACKLOG)]
        backlog += [stack.submit_nowait(i.key, {"n": n}, "nowhere")
                    for n, i in enumerate(backlog)]
        stack.producer.flush()

        group.set_limit(WORKING)  # the condition clears
        stack.restart_processor(kill=False)
        for intent in paid:
            receipt = stack.await_key(intent.key, TERMINAL, timeout_s=120)
            assert receipt.key_status is ev.ReceiptStatus.SUCCEEDED, receipt
        topics = _answered(stack, [i.event_id for i in backlog], timeout_s=180)

        assert all(calls(sandbox, i.key) == 1 for i in paid)
        dispatched = Counter(d.key for d in topics.dispatches)
        assert {dispatched[i.key] for i in backlog} == {1}  # one dispatch per key
        assert group.oom_kills() == killed, "killed again under the working limit"
        assert stack.processor.alive()
        print(f"processor peak inside the group: {group.peak_bytes() / MIB:.0f} MiB "
              f"(limit {WORKING // MIB} MiB) after {2 * BACKLOG} backlog intents",
              file=sys.stderr)
    finally:
        stack.close()
        group.remove()


def _answered(stack: Stack, event_ids: list[str], timeout_s: float) -> LedgerTopics:
    """The ledger's topics once every intent in ``event_ids`` has a receipt naming it."""
    deadline = time.monotonic() + timeout_s
    while True:
        topics = LedgerTopics.read_from(stack.bootstrap, stack.settings)
        missing = set(event_ids) - {r.intent_event_id for r in topics.receipts}
        if not missing:
            return topics
        assert time.monotonic() < deadline, (
            f"{len(missing)} backlog intents unanswered\n{stack.processor.tail()}")
        time.sleep(2)

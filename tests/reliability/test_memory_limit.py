"""The processor under a real kernel memory limit (a memory cgroup of its own): squeezed below
what it needs while it works through a backlog, the kernel kills it (SIGKILL, counted as an
OOM kill by the group), and that loses nothing; with the limit raised it starts again,
finishes the backlog inside the limit, one dispatch per key, one effect per paid key.

Effects are counted at the payments sandbox (its own ledger), dispatches and answers on the
ledger's topics. Only the processor is in the group; the connector runs outside it.
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

pytestmark = pytest.mark.timeout(360)
MIB = 1 << 20
ROOMY = 1024 * MIB
FRESH, DUPLICATES = 15_000, 5_000
SQUEEZE_STEP = 2 * MIB


def calls(sandbox: SandboxProc, key: str) -> int:
    return sum(1 for r in sandbox.ledger()["requests"] if r["idempotency_key"] == key)


@pytest.mark.skipif(not cgroup.available(), reason="needs root and a writable memory cgroup "
                    "hierarchy (CI runs as root)")
def test_a_processor_squeezed_below_its_memory_is_killed_mid_backlog_and_loses_nothing(
        ledger_topics, tmp_path: Path, sandbox: SandboxProc) -> None:
    group = cgroup.MemoryCgroup.create(ROOMY)
    stack = Stack(ledger_topics, tmp_path, processor_cgroup=group.path)
    try:
        stack.connector("http", "--name", "sandbox", "--base-url", sandbox.url)
        paid = [stack.submit(f"acme/refund/mem-{i}", {"amount": i + 1}, "sandbox")
                for i in range(20)]
        for intent in paid:
            assert stack.await_key(intent.key, TERMINAL).key_status \
                is ev.ReceiptStatus.SUCCEEDED
        idle = group.usage_bytes()
        # Squeeze: the limit goes down to what the group uses now (the kernel refuses a
        # limit it cannot reclaim down to; the last one it took holds), then the backlog.
        limit = group.usage_bytes() + SQUEEZE_STEP
        group.set_limit(limit)
        while limit > SQUEEZE_STEP and group.try_limit(limit - SQUEEZE_STEP):
            limit -= SQUEEZE_STEP
        squeezed_to = limit

        # A backlog for a target with no connector: each fresh key is reserved, dispatched
        # and answered, then waits; each duplicate gets the first answer.
        backlog = [stack.submit_nowait(f"acme/write/backlog-{i}", {"n": i}, "nowhere")
                   for i in range(FRESH)]
        backlog += [stack.submit_nowait(backlog[n].key, {"n": n}, "nowhere")
                    for n in range(DUPLICATES)]
        stack.producer.flush()
        stack.processor.popen.wait(30)
        assert stack.processor.popen.returncode == -9, stack.processor.tail()
        assert group.oom_kills() >= 1  # the kernel killed it for memory, nothing else did
        killed = group.oom_kills()

        group.set_limit(ROOMY)  # the condition clears
        stack.restart_processor(kill=False)
        topics = _answered(stack, [i.event_id for i in backlog], timeout_s=240)
        dispatched = Counter(d.key for d in topics.dispatches)
        assert {dispatched[backlog[n].key] for n in range(FRESH)} == {1}
        assert all(calls(sandbox, i.key) == 1 for i in paid)
        assert group.oom_kills() == killed and stack.processor.alive()
        print(f"processor inside its cgroup: {idle / MIB:.0f} MiB idle, killed at a limit of "
              f"{squeezed_to / MIB:.0f} MiB, peak {group.peak_bytes() / MIB:.0f} MiB "
              f"with {FRESH + DUPLICATES} backlog intents", file=sys.stderr)
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

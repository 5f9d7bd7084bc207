"""The processor under a real kernel memory limit (a memory cgroup of its own): squeezed to
what it uses while it is answering a backlog, it is killed by the kernel (SIGKILL, counted as
an OOM kill by the group) when more work arrives, with part of the backlog answered (the
squeeze waits for a first answer) and the rest not, and that loses nothing; with the limit
raised it starts again and finishes the backlog, one dispatch per key, and the payments
submitted just before the kill are each made exactly once.

Effects are counted at the payments sandbox (its own ledger), dispatches and answers on the
ledger's topics. Only the processor is in the group; the connector runs outside it.
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from ledger_lab.falsify.evidence import LedgerTopics
from ledger_lab.harness import cgroup
from ledger_lab.harness.sandbox import SandboxProc
from ledger_lab.harness.stack import TERMINAL, Stack
from ledger_stream.domain import events as ev

pytestmark = pytest.mark.timeout(360)
MIB = 1 << 20
ROOMY = 1024 * MIB
FRESH, DUPLICATES = 15_000, 5_000
FIRST = 2_000  # fresh backlog keys sent before the squeeze


def calls(sandbox: SandboxProc, key: str) -> int:
    return sum(1 for r in sandbox.ledger()["requests"] if r["idempotency_key"] == key)


@pytest.mark.skipif(not cgroup.available(), reason="needs root and a writable memory cgroup "
                    "hierarchy (CI runs as root)")
def test_a_processor_squeezed_below_its_memory_is_killed_mid_backlog_and_loses_nothing(
        ledger_topics, tmp_path: Path, sandbox: SandboxProc) -> None:
    group = cgroup.MemoryCgroup.create(ROOMY)
    stack: Stack | None = None
    try:
        stack = Stack(ledger_topics, tmp_path, processor_cgroup=group.path)
        stack.connector("http", "--name", "sandbox", "--base-url", sandbox.url)
        paid = [stack.submit(f"acme/refund/mem-{i}", {"amount": i + 1}, "sandbox")
                for i in range(10)]
        for intent in paid:
            assert stack.await_key(intent.key, TERMINAL).key_status \
                is ev.ReceiptStatus.SUCCEEDED
        # A backlog for a target with no connector: each fresh key is reserved, dispatched
        # and answered, then waits; each duplicate gets the first answer. Its first part
        # comes while the processor has room, and is being answered when the squeeze comes.
        backlog = [stack.submit_nowait(f"acme/write/backlog-{i}", {"n": i}, "nowhere")
                   for i in range(FIRST)]
        stack.producer.flush()
        wait_until(lambda: _answered_now(stack, backlog) > 0, 60, "a first backlog answer")
        # Squeezed: the limit goes down to what the processor uses now (a limit below it
        # would be refused), then paid keys and the rest of the backlog come.
        idle = group.squeeze()
        paid += [stack.submit_nowait(f"acme/refund/mem-{i}", {"amount": i + 1}, "sandbox")
                 for i in range(10, 30)]
        backlog += [stack.submit_nowait(f"acme/write/backlog-{i}", {"n": i}, "nowhere")
                    for i in range(FIRST, FRESH)]
        backlog += [stack.submit_nowait(backlog[n].key, {"n": n}, "nowhere")
                    for n in range(DUPLICATES)]
        stack.producer.flush()
        stack.processor.popen.wait(60)
        assert stack.processor.popen.returncode == -9, stack.processor.tail()
        assert group.oom_kills() >= 1  # the kernel killed it for memory, nothing else did
        killed = group.oom_kills()
        answered = _answered_now(stack, backlog)
        assert answered < len(backlog), "killed only after the backlog was done"

        group.set_limit(ROOMY)  # the condition clears
        stack.restart_processor(kill=False)
        for intent in paid:
            assert stack.await_key(intent.key, TERMINAL, timeout_s=120).key_status \
                is ev.ReceiptStatus.SUCCEEDED
        topics = _answered(stack, [i.event_id for i in backlog], timeout_s=240)
        dispatched = Counter(d.key for d in topics.dispatches)
        assert {dispatched[backlog[n].key] for n in range(FRESH)} == {1}
        assert all(calls(sandbox, i.key) == 1 for i in paid)
        assert group.oom_kills() == killed and stack.processor.alive()
        print(f"processor inside its cgroup: {idle / MIB:.0f} MiB at the squeeze, killed at that "
              f"limit after answering {answered} of {len(backlog)} backlog intents; peak "
              f"{group.peak_bytes() / MIB:.0f} MiB while finishing them", file=sys.stderr)
    finally:
        if stack is not None:
            stack.close()
        group.remove()


def wait_until(ok: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not ok():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def _answered_now(stack: Stack, intents: list[ev.Intent]) -> int:
    """How many of ``intents`` a receipt names now."""
    named = {r.intent_event_id for r in LedgerTopics.read_from(stack.bootstrap,
                                                               stack.settings).receipts}
    return sum(1 for i in intents if i.event_id in named)


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

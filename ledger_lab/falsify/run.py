"""One run of one scenario: the agent's steps as real worker processes, then the verdict.

A scenario drives a :class:`Run`: it names the invoices it refunds (each one operation key,
with the effects and final status the ledger must end with), runs workers, kills and
restarts processes, and records checks. :meth:`Run.finish` then reads the evidence (the
sandbox's own ledger, the ledger's topics) and returns the :class:`RunResult`.

With the ledger, a run passes when every key has exactly its expected effects (one, unless
stated), the attempts at the target carry distinct attempt ids, every conflicting intent was
rejected and never reached the target, no request at the target lacks an intent and a
claimed attempt, no approval mismatch was dispatched, every ambiguous outcome ended as its
target allows (by lookup, or `needs_reconciliation` where it cannot be queried), and
every scenario check held. Bypassed, a run passes when it shows what the ledger prevents
(by default: a second effect for one key), which proves the scenario is real.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Collection, Mapping
from typing import Any

from ledger_lab.falsify.evidence import (
    LedgerTopics,
    TargetLedger,
    ambiguous_keys,
    approval_mismatches_accepted,
    read_topics,
    refund_key,
    uncorrelated_requests,
)
from ledger_lab.falsify.result import RunResult, ambiguous_ended_right
from ledger_lab.harness.agents import AgentWorld, WorkerRun
from ledger_stream.domain import events as ev

SETTLE_TIMEOUT_S = 90.0
Demonstration = Callable[[TargetLedger, Collection[str]], tuple[bool, str]]


class Background:
    """A call on a thread of its own (a worker running while the scenario breaks things)."""

    def __init__(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        self._value: Any = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._call, args=(fn, args, kwargs), daemon=True)
        self._thread.start()

    def _call(self, fn: Callable[..., Any], args: tuple[Any, ...],
              kwargs: dict[str, Any]) -> None:
        try:
            self._value = fn(*args, **kwargs)
        except BaseException as exc:  # handed to whoever asks for the result
            self._error = exc

    def done(self) -> bool:
        return not self._thread.is_alive()

    def result(self, timeout_s: float = 120.0) -> Any:
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            raise TimeoutError(f"background call still running after {timeout_s}s")
        if self._error is not None:
            raise self._error
        return self._value


class Run:
    """The scenario's handle on its world; see the module docstring for the verdict."""

    def __init__(self, world: AgentWorld, *, scenario: int, label: str, title: str,
                 ledger: bool, durability: str = "sync", graph: str | None = None,
                 variants: Mapping[str, str] | None = None) -> None:
        self.world, self.ledger, self.durability = world, ledger, durability
        self.graph = graph  # the variant workers run when the scenario names none
        self._variants = dict(variants or {})  # a scenario's variant -> this agent's form
        self.scenario, self.label, self.title = scenario, label, title
        self.expected: dict[str, tuple[int, str]] = {}  # key -> (effects, final key status)
        self.conflicts: list[tuple[str, str]] = []  # (key, args hash) that must never apply
        self.expect_ambiguous = False
        self.target_queryable = True  # False: the scenario's connector has no lookup
        self.demonstration: Demonstration = duplicate_effect
        self.failures: list[str] = []
        self.notes: list[str] = []
        self._started = time.monotonic()

    # --- what the scenario works on -------------------------------------------------------

    @staticmethod
    def invoice_id() -> str:
        return f"inv-{uuid.uuid4().hex[:8]}"

    def new_invoice(self, effects: int = 1, status: str = "succeeded") -> str:
        """A fresh invoice whose refund key this run tracks."""
        invoice = self.invoice_id()
        self.track(refund_key(invoice), effects, status)
        return invoice

    def track(self, key: str, effects: int = 1, status: str = "succeeded") -> None:
        """With the ledger, ``key`` must end with ``effects`` effects and ``status``."""
        self.expected[key] = (effects, status)

    def conflict(self, key: str, args_hash: str) -> None:
        """An intent for ``key`` with these arguments must be rejected, with no effect."""
        self.conflicts.append((key, args_hash))

    # --- workers ----------------------------------------------------------------------------

    def variant(self, name: str) -> str:
        """The variant ``name`` (as the scenario knows it) in this run's agent flavour."""
        return self._variants.get(name, name)

    def worker(self, thread: str, action: str, *extra: str, failpoint: str | None = None,
               version: str | None = None, graph: str | None = None,
               timeout_s: float = 120, bypass: bool = False) -> WorkerRun:
        """A worker step; ``bypass``: its refunds go straight to the payments API even in
        the run with the ledger (a tool wired around it)."""
        graph = graph or self.graph
        args = [*extra, *(("--graph", graph) if graph else ())]
        return self.world.worker(thread, action, *args, failpoint=failpoint,
                                 bypass=bypass or not self.ledger, durability=self.durability,
                                 version=version, timeout_s=timeout_s)

    def resume(self, thread: str, graph: str | None = None) -> WorkerRun:
        """Resume a thread whose worker was killed. With durability "async" the approval's
        checkpoint may have died with the worker (it is written while the next step runs):
        the thread is then back at the approval, and the human approves again, as they
        would on seeing the request still open."""
        resumed = self.ok(self.worker(thread, "resume", graph=graph), "resume")
        if (resumed.output or {}).get("waiting_on"):
            self.note("the approval died with the worker: approved again")
            resumed = self.ok(self.worker(thread, "approve", graph=graph), "approve again")
        return resumed

    def start(self, invoice: str, amount: float = 125.0, graph: str | None = None,
              version: str | None = None, bypass: bool = False) -> str:
        """A new thread that asked for the refund and waits for the human's approval."""
        thread = f"t-{uuid.uuid4().hex[:8]}"
        self.ok(self.worker(thread, "start", "--invoice", invoice, "--amount", str(amount),
                            graph=graph, version=version, bypass=bypass), "start")
        return thread

    def background(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Background:
        return Background(fn, *args, **kwargs)

    # --- checks -----------------------------------------------------------------------------

    def check(self, ok: bool, why: str) -> bool:
        if not ok:
            self.failures.append(why)
        return ok

    def note(self, text: str) -> None:
        self.notes.append(text)

    def ok(self, done: WorkerRun, what: str) -> WorkerRun:
        self.check(done.returncode == 0,
                   f"{what}: worker exited {done.returncode}: {_tail(done.log)}")
        return done

    def killed(self, done: WorkerRun, what: str) -> WorkerRun:
        self.check(done.returncode == -9, f"{what}: expected SIGKILL at the failpoint, "
                   f"worker exited {done.returncode}: {_tail(done.log)}")
        return done

    def receipt(self, done: WorkerRun, key: str) -> dict[str, Any]:
        """The receipt the worker's thread holds for ``key`` ({} when none)."""
        receipts = (done.output or {}).get("ledger_receipts", {})
        return dict(receipts.get(key) or {})

    def intents(self, key: str) -> list[ev.Intent]:
        """Every intent the ledger received for ``key``."""
        topic = self.world.stack.settings.topic("intents")
        return [i for i in read_topics(self.world.stack.bootstrap, [topic])[topic]
                if isinstance(i, ev.Intent) and i.key == key]

    def has_alert(self, key: str, kind: str, timeout_s: float = 15.0,
                  naming: str = "") -> bool:
        """Whether the ledger raised alert ``kind`` for ``key``, its detail naming
        ``naming`` (waiting up to timeout_s)."""
        topic = self.world.stack.settings.topic("alerts")
        deadline = time.monotonic() + timeout_s
        while True:
            alerts = read_topics(self.world.stack.bootstrap, [topic])[topic]
            if any(isinstance(a, ev.Alert) and a.key == key and a.kind.value == kind
                   and naming in a.detail for a in alerts):
                return True
            if time.monotonic() > deadline:
                return False
            time.sleep(0.3)

    def wait_status(self, key: str, statuses: set[str], timeout_s: float = 60.0) -> str:
        """The key's status once it is one of ``statuses`` (or the last seen, on timeout)."""
        deadline = time.monotonic() + timeout_s
        status = ""
        while time.monotonic() < deadline:
            found = self.world.stack.receipts(key)
            status = found[-1].key_status.value if found else ""
            if status in statuses:
                break
            time.sleep(0.25)
        return status

    # --- verdict ----------------------------------------------------------------------------

    def finish(self) -> RunResult:
        return self._judge_ledger() if self.ledger else self._judge_bypass()

    def fail(self, exc: BaseException) -> RunResult:
        """The verdict when the scenario itself raised."""
        self.failures.append(f"scenario raised {type(exc).__name__}: {exc}")
        try:
            return self.finish()
        except Exception as again:  # the world is too broken to observe
            self.failures.append(f"observing failed: {type(again).__name__}: {again}")
            return self._result(passed=False)

    def _judge_ledger(self) -> RunResult:
        for key, (_, status) in self.expected.items():
            final = self.wait_status(key, {status}, SETTLE_TIMEOUT_S)
            self.check(final == status, f"{key} ended {final or 'without a receipt'}, "
                       f"expected {status}")
        target, topics = TargetLedger.read(self.world), LedgerTopics.read(self.world)
        effects = {k: len(target.effects_for(k, bypass=False)) for k in self.expected}
        for key, (want, _) in self.expected.items():
            self.check(effects[key] == want, f"{key}: {effects[key]} effects at the target, "
                       f"expected {want}")
        attempt_ids = {k: [str(r["attempt_id"]) for r in target.requests_for(k)]
                       for k in self.expected}
        distinct = all(len(set(ids)) == len(ids) for ids in attempt_ids.values())
        self.check(distinct, f"attempt ids repeat at the target: {attempt_ids}")
        conflicts_ok = self._conflicts_rejected(target, topics) if self.conflicts else None
        stray = uncorrelated_requests(target, topics)
        self.check(not stray, f"{len(stray)} requests at the target with no intent or "
                   f"claimed attempt: {stray[:3]}")
        mismatches = approval_mismatches_accepted(topics)
        self.check(not mismatches, f"approval mismatches dispatched: {mismatches}")
        ambiguous = ambiguous_keys(topics)
        can = "can" if self.target_queryable else "cannot"
        self.check(ambiguous_ended_right(ambiguous, self.target_queryable),
                   f"ambiguous outcomes at a target that {can} be queried ended {ambiguous}")
        if self.expect_ambiguous:
            self.check(any(k in ambiguous for k in self.expected),
                       "no ambiguous outcome happened: the fault did not bite")
        return self._result(
            passed=not self.failures, effects=effects, attempt_ids=attempt_ids,
            distinct_attempt_ids=distinct, conflicts_rejected=conflicts_ok,
            receipts={k: topics.final_status(k) for k in self.expected},
            uncorrelated_requests=len(stray), approval_mismatches_accepted=len(mismatches),
            ambiguous=ambiguous, target_queryable=self.target_queryable)

    def _conflicts_rejected(self, target: TargetLedger, topics: LedgerTopics) -> bool:
        ok = True
        for key, bad in self.conflicts:
            reached = [r for r in target.requests_for(key) if r["body_hash"] == bad]
            ok &= self.check(not reached, f"{key}: conflicting arguments reached the target")
            intents = [i for i in topics.intents_for(key) if i.args_hash == bad]
            ok &= self.check(bool(intents), f"{key}: the conflicting intent was never sent")
            for intent in intents:
                answer = topics.answer(intent.event_id)
                status = answer.status.value if answer else "no receipt"
                ok &= self.check(status in (ev.ReceiptStatus.REJECTED, ev.ReceiptStatus.HELD),
                                 f"{key}: conflicting intent answered {status}")
        return ok

    def _judge_bypass(self) -> RunResult:
        target = TargetLedger.read(self.world)
        effects = {k: len(target.effects_for(k, bypass=True)) for k in self.expected}
        shown, what = self.demonstration(target, list(self.expected))
        self.check(shown, f"bypassed, the scenario did not show its failure ({what}): "
                   "the scenario is not real")
        if shown:
            self.note(f"without the ledger: {what}")
        return self._result(passed=not self.failures, effects=effects)

    def _result(self, passed: bool, **evidence: Any) -> RunResult:
        why = "; ".join(self.failures) if self.failures else "; ".join(self.notes)
        return RunResult(self.scenario, self.label, self.title, self.ledger, passed, why,
                         notes=tuple(self.notes),
                         seconds=round(time.monotonic() - self._started, 1), **evidence)


def duplicate_effect(target: TargetLedger, keys: Collection[str]) -> tuple[bool, str]:
    """The default demonstration: one of the run's refunds was paid more than once."""
    counts = {key: len(target.effects_for(key, bypass=True)) for key in keys}
    key = max(counts, key=lambda k: counts[k], default="")
    return counts.get(key, 0) >= 2, f"{counts.get(key, 0)} effects for {key}"


def _tail(log: str, chars: int = 400) -> str:
    return " ".join(log[-chars:].split())

"""The connector worker's call thread (connector/runtime.py ``_call``): whatever goes wrong
around a call, its job gets a completion. A bug in a Target's ``classify`` once left the job
calling for good (no outcome, its key, a slot and its partition's commits held), found by a
review on 2026-12-05."""

from __future__ import annotations

import os
import queue
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from ledger_stream.connector import runtime
from ledger_stream.connector.commands import Call
from ledger_stream.connector.memory import MemoryTarget
from ledger_stream.connector.target import EffectRequest
from ledger_stream.domain import events as ev

pytestmark = pytest.mark.timeout(30)


class BadClassify(MemoryTarget):
    def classify(self, error: Exception) -> ev.OutcomeStatus:
        raise RuntimeError("bug in classify")


class Recorder:
    def __init__(self) -> None:
        self.called: list[tuple[int, ev.OutcomeStatus, str, str]] = []
        self.threads: list[int] = []  # where each completion ran
        self._got = threading.Event()

    def called_(self, job_id: int, status: ev.OutcomeStatus, external_id: str, error: str,
                now_ms: int) -> list[object]:
        self.called.append((job_id, status, external_id, error))
        self.threads.append(threading.get_ident())
        self._got.set()
        return []

    def wait(self) -> None:
        """Until a completion ran (on the thread the call ended on)."""
        assert self._got.wait(5), "no completion"


def worker(target: MemoryTarget, core: Recorder) -> runtime.ConnectorWorker:
    """The parts of a worker its call thread uses, without Kafka clients."""
    w = runtime.ConnectorWorker.__new__(runtime.ConnectorWorker)
    w._target = target
    w._done = queue.SimpleQueue()
    # The test's thread plays the loop: what ends on it waits in ``_done`` for the loop.
    w._lock, w._loop_thread = threading.RLock(), threading.get_ident()
    w._traces, w._traces_lock = {}, threading.Lock()
    w._core = type("Core", (), {"called": staticmethod(core.called_)})()
    return w


def test_a_call_whose_classification_raises_is_reported_unknown() -> None:
    target, core = BadClassify(), Recorder()
    target.fail_next("drop")  # applied, then the connection is lost
    w = worker(target, core)
    request = EffectRequest("acme/pay/k1", 1, "c1", "pay", {"amount": 1}, "h")
    with ThreadPoolExecutor(1) as pool:
        assert pool.submit(w._call, Call(7, request, 2.0, 0)).exception(timeout=5) is None
    assert target.effect_count("acme/pay/k1") == 1  # the effect happened...
    assert w._done.empty()  # ...and the job has its completion, run on the call's thread
    [(job_id, status, _, error)] = core.called
    assert (job_id, status) == (7, ev.OutcomeStatus.UNKNOWN)
    # The class only: a bug's message (or its cause's) may quote the target's answer.
    assert error == "RuntimeError [message not shown: 15 characters]"


def test_a_call_that_succeeds_is_reported_as_such() -> None:
    target, core = MemoryTarget(), Recorder()
    w = worker(target, core)
    request = EffectRequest("acme/pay/k2", 1, "c2", "pay", {"amount": 1}, "h")
    w._call(Call(8, request, 2.0, 0))
    w._done.get(timeout=5)()
    [(job_id, status, external_id, _)] = core.called
    assert (job_id, status, external_id) == (8, ev.OutcomeStatus.SUCCEEDED, "mem-1")


PAN = "4111 1111 1111 1111"


class EchoingTarget(MemoryTarget):
    """A Target whose errors carry the target's text, as client libraries' often do."""

    def __init__(self, raise_: Exception) -> None:
        super().__init__()
        self.raise_ = raise_

    def apply(self, request: EffectRequest, timeout_s: float) -> str:
        try:
            raise ValueError(f"server said: card {PAN} declined")
        except ValueError as cause:
            raise self.raise_ from cause

    def lookup(self, key: str, timeout_s: float) -> str | None:
        raise self.raise_


@pytest.mark.parametrize("raised", [
    RuntimeError(f"HTTP 402: card {PAN} declined"),  # a library's error let through
    KeyError(PAN),
])
def test_an_error_that_quotes_the_target_is_recorded_and_logged_as_its_class_only(
        raised: Exception, caplog: pytest.LogCaptureFixture) -> None:
    core = Recorder()
    w = worker(EchoingTarget(raised), core)
    w._call(Call(9, EffectRequest("acme/pay/k3", 1, "c3", "pay", {}, "h"), 2.0, 0))
    w._done.get(timeout=5)()
    [(_, status, _, error)] = core.called
    assert status is ev.OutcomeStatus.UNKNOWN
    assert error == f"{type(raised).__name__} [message not shown: {len(str(raised))} characters]"
    logged = "\n".join(f"{r.getMessage()} {vars(r)}" for r in caplog.records)
    assert "4111" not in logged


def test_a_target_error_is_recorded_as_its_summary() -> None:
    from ledger_stream.connector.redaction import SUMMARY
    from ledger_stream.connector.target import TargetError

    core = Recorder()
    w = worker(EchoingTarget(TargetError("HTTP 402 (refused) [x] " + "y" * 300)), core)
    w._call(Call(10, EffectRequest("acme/pay/k4", 1, "c4", "pay", {}, "h"), 2.0, 0))
    w._done.get(timeout=5)()
    [(_, _, _, error)] = core.called
    assert error.startswith("TargetError [HTTP 402 (refused) (x) yyy") and error.endswith("...]")
    assert len(error) <= 200 and SUMMARY.fullmatch(error)


def test_a_failed_lookup_is_reported_as_a_summary() -> None:
    from ledger_stream.connector.commands import Lookup

    answers: list[object] = []
    w = worker(EchoingTarget(RuntimeError(f"card {PAN}")), Recorder())
    w._core = type("Core", (), {"looked_up": staticmethod(
        lambda job_id, answer, now_ms: answers.append(answer) or [])})()
    w._target.name = "mem"
    w._lookup(Lookup(11, "acme/pay/k5", 2.0))
    w._done.get(timeout=5)()
    [answer] = answers
    assert answer.unavailable == "RuntimeError [message not shown: 24 characters]"


def test_a_call_without_a_trace_or_a_tracer_opens_no_span(monkeypatch) -> None:
    # Such a span records and passes on nothing; it cost about 30 µs of CPU per call.
    from ledger_stream import tracing

    monkeypatch.setattr(tracing, "installed", lambda: False)
    opened: list[str] = []
    real = tracing.span

    def spy(name: str, **kwargs: object) -> object:
        opened.append(name)
        return real(name, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(tracing, "span", spy)
    target, core = MemoryTarget(), Recorder()
    w = worker(target, core)
    request = EffectRequest("acme/pay/k2", 1, "c2", "pay", {"amount": 1}, "h")
    w._call(Call(8, request, 2.0, 0))
    w._done.get(timeout=5)()
    assert [status for _, status, _, _ in core.called] == [ev.OutcomeStatus.SUCCEEDED]
    assert opened == []
    w._traces["acme/pay/k3"] = (("traceparent", b"00-" + b"1" * 32 + b"-" + b"2" * 16 + b"-01"),)
    w._call(Call(9, EffectRequest("acme/pay/k3", 1, "c3", "pay", {}, "h"), 2.0, 0))
    assert opened == [f"ledger.apply {target.name}"]  # a dispatch's trace still gets its span


def test_tracing_is_installed_only_once_a_provider_is_set() -> None:
    """In a fresh interpreter: a tracer provider is process-wide, and another test of this
    process may have set one."""
    import subprocess
    import sys

    check = ("from opentelemetry import trace\n"
             "from opentelemetry.sdk.trace import TracerProvider\n"
             "from ledger_stream import tracing\n"
             "before = tracing.installed()\n"
             "trace.set_tracer_provider(TracerProvider())\n"
             "print(before, tracing.installed())\n")
    done = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True,
                          timeout=60, env={k: v for k, v in os.environ.items()
                                           if not k.startswith(("OTEL_", "LEDGER_TRACING"))})
    assert done.stdout.split() == ["False", "True"], done.stderr


def test_ids_are_unique_hex_and_read_the_kernel_once_per_process(monkeypatch) -> None:
    # uuid4 read the kernel's random bytes for every id: three system calls per dispatch.
    import os

    reads: list[int] = []
    real = os.urandom
    monkeypatch.setattr(os, "urandom", lambda n: reads.append(n) or real(n))
    first, second = runtime.id_source(), runtime.id_source()
    ids = [first() for _ in range(10_000)] + [second() for _ in range(10_000)]
    assert len(set(ids)) == len(ids)
    assert all(len(i) == 32 and int(i, 16) >= 0 for i in ids)
    assert len(reads) == 2  # one prefix per source, none per id


# --- a target that runs calls on its own I/O (Target.start_apply) ------------------------------


class OwnIo(MemoryTarget):
    """Runs ``apply`` on a thread of its own and hands the result to ``done``; or raises
    ``start_raises`` from ``start_apply`` itself."""

    def __init__(self, start_raises: Exception | None = None) -> None:
        super().__init__()
        self.start_raises, self.started = start_raises, 0

    def start_apply(self, request, timeout_s, done) -> bool:  # type: ignore[no-untyped-def]
        if self.start_raises is not None:
            raise self.start_raises
        self.started += 1

        def run() -> None:
            try:
                receipt = self.apply(request, timeout_s)
            except Exception as exc:  # noqa: BLE001 - handed over, as the contract says
                done("", exc)
                return
            done(receipt, None)

        threading.Thread(target=run).start()
        return True


class Submitted:
    """The worker's thread pool: records what it is given, runs nothing."""

    def __init__(self) -> None:
        self.jobs: list[object] = []

    def submit(self, job: object) -> None:
        self.jobs.append(job)


def own_io_worker(target: MemoryTarget, core: Recorder) -> runtime.ConnectorWorker:
    w = worker(target, core)
    w._pool = Submitted()  # type: ignore[assignment]
    return w


def test_a_call_the_target_runs_itself_takes_no_worker_thread_and_is_reported() -> None:
    target, core = OwnIo(), Recorder()
    w = own_io_worker(target, core)
    w._start_call(Call(11, EffectRequest("acme/pay/k5", 1, "c5", "pay", {}, "h"), 2.0, 0))
    core.wait()
    assert core.called == [(11, ev.OutcomeStatus.SUCCEEDED, "mem-1", "")]
    assert target.started == 1 and w._pool.jobs == []  # type: ignore[attr-defined]


def test_a_failure_the_target_runs_itself_is_classified_as_on_a_thread() -> None:
    target, core = OwnIo(), Recorder()
    target.fail_next("drop")  # applied, then the connection is lost
    w = own_io_worker(target, core)
    w._start_call(Call(12, EffectRequest("acme/pay/k6", 1, "c6", "pay", {}, "h"), 2.0, 0))
    core.wait()
    [(job_id, status, external_id, _)] = core.called
    assert (job_id, status, external_id) == (12, ev.OutcomeStatus.UNKNOWN, "")


def test_start_apply_raising_is_reported_unknown_as_its_class_only(
        caplog: pytest.LogCaptureFixture) -> None:
    core = Recorder()
    w = own_io_worker(OwnIo(start_raises=RuntimeError(f"card {PAN}")), core)
    w._start_call(Call(13, EffectRequest("acme/pay/k7", 1, "c7", "pay", {}, "h"), 2.0, 0))
    w._done.get(timeout=5)()
    [(job_id, status, _, error)] = core.called
    assert (job_id, status) == (13, ev.OutcomeStatus.UNKNOWN)
    assert "4111" not in error and error.startswith("RuntimeError")
    # A bug, whatever the target's classify would make of it: logged as one.
    assert [r.getMessage() for r in caplog.records] == ["call failed inside the connector"]


def test_a_call_whose_lease_ran_out_is_left_to_a_thread_that_reports_it_not_called() -> None:
    target, core = OwnIo(), Recorder()
    w = own_io_worker(target, core)
    w._start_call(Call(14, EffectRequest("acme/pay/k8", 1, "c8", "pay", {}, "h"), 2.0, 1))
    assert target.started == 0
    [job] = w._pool.jobs  # type: ignore[attr-defined]
    job()  # type: ignore[operator]
    w._done.get(timeout=5)()
    assert core.called[0][:2] == (14, ev.OutcomeStatus.NOT_CALLED)
    assert target.effect_count("acme/pay/k8") == 0


def test_a_target_without_its_own_io_is_called_on_a_thread() -> None:
    target, core = MemoryTarget(), Recorder()
    w = own_io_worker(target, core)
    w._start_call(Call(15, EffectRequest("acme/pay/k9", 1, "c9", "pay", {}, "h"), 2.0, 0))
    [job] = w._pool.jobs  # type: ignore[attr-defined]
    job()  # type: ignore[operator]
    w._done.get(timeout=5)()
    assert core.called == [(15, ev.OutcomeStatus.SUCCEEDED, "mem-1", "")]


def test_a_call_that_ends_on_another_thread_is_handled_there_at_once() -> None:
    """Its outcome is produced as the call ends, not when the loop next looks: handed to
    the loop, it waited up to a poll of the feed (5 ms; about 2.5 ms of every fresh
    submit). Under the worker's lock, as the loop holds it for the core; while another
    holds that, the completion is left to the loop (next test)."""
    target, core = OwnIo(), Recorder()
    w = own_io_worker(target, core)
    w._lock = Witness()  # type: ignore[assignment]
    w._start_call(Call(16, EffectRequest("acme/pay/k10", 1, "c10", "pay", {}, "h"), 2.0, 0))
    core.wait()  # without the loop taking anything from ``_done``
    assert w._done.empty() and core.called == [(16, ev.OutcomeStatus.SUCCEEDED, "mem-1", "")]
    assert core.threads != [threading.get_ident()]
    assert w._lock.held_by == core.threads  # type: ignore[attr-defined]


class Witness:
    """A lock that notes the threads that held it while a completion ran."""

    def __init__(self) -> None:
        self._lock, self.held_by = threading.RLock(), []  # type: list[int]

    def acquire(self, blocking: bool = True) -> bool:
        got = self._lock.acquire(blocking)
        if got:
            self.held_by.append(threading.get_ident())
        return got

    def release(self) -> None:
        self._lock.release()

    def __enter__(self) -> None:
        self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def test_a_call_that_ends_while_the_lock_is_held_is_left_to_the_loop() -> None:
    """A completion never waits for the lock: with 256 call threads queueing on it, the
    waits cost more CPU than the hand-off (the sleeping target's 156 µs per dispatch
    became 241)."""
    target, core = OwnIo(), Recorder()
    w = own_io_worker(target, core)
    w._lock.acquire()  # the loop is feeding the core
    try:
        w._start_call(Call(17, EffectRequest("acme/pay/k11", 1, "c11", "pay", {}, "h"),
                           2.0, 0))
        w._done.get(timeout=5)()  # handed over, not waited for
    finally:
        w._lock.release()
    assert core.called == [(17, ev.OutcomeStatus.SUCCEEDED, "mem-1", "")]
    assert core.threads == [threading.get_ident()]  # run by the loop


def test_a_completion_that_fails_on_the_calls_thread_fails_on_the_loop() -> None:
    """A completion run on the thread its call ended on (a pool thread here, the HTTP
    exchange loop's for a call it carried) may raise: the outcome's record cannot be
    encoded (the schema registry, asked once per event type, is down) or produced. Run by
    the loop, as before completions ran there, that error stops the connector; on the
    call's thread it was only logged by the pool, the job left reporting for good (its key,
    a slot and its partition's commits held, the key's Reconcile queued behind it)."""
    from functools import partial

    from ledger_stream.connector.calls import CallPool
    from ledger_stream.connector.commands import Produce
    from ledger_stream.serde.exceptions import SchemaRegistryUnavailable

    class DownRegistry:
        def encode(self, event: object) -> bytes:
            raise SchemaRegistryUnavailable("registering AttemptOutcome: connection refused")

    core = Recorder()
    outcome = ev.AttemptOutcome("o1", "acme/pay/k6", 1, "c6", ev.OutcomeStatus.SUCCEEDED, 1,
                                "mem-1")
    w = worker(MemoryTarget(), core)
    w._core = type("Core", (), {"called": staticmethod(
        lambda *args: core.called_(*args) or [Produce(12, outcome)])})()
    w._codec, w._attempts = DownRegistry(), "ledger.attempts"
    pool = CallPool(1, "test-call")
    try:
        pool.submit(partial(w._call, Call(12, EffectRequest("acme/pay/k6", 1, "c6", "pay", {},
                                                            "h"), 2.0, 0)))
        core.wait()
        completion = w._done.get(timeout=5)  # the error, handed to the loop
    finally:
        pool.close()
    with pytest.raises(SchemaRegistryUnavailable):
        completion()

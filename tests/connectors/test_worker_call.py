"""The connector worker's call thread (connector/runtime.py ``_call``): whatever goes wrong
around a call, its job gets a completion. A bug in a Target's ``classify`` once left the job
calling for good (no outcome, its key, a slot and its partition's commits held), found by a
review on 2026-12-05."""

from __future__ import annotations

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

    def called_(self, job_id: int, status: ev.OutcomeStatus, external_id: str, error: str,
                now_ms: int) -> list[object]:
        self.called.append((job_id, status, external_id, error))
        return []


def worker(target: MemoryTarget, core: Recorder) -> runtime.ConnectorWorker:
    """The parts of a worker its call thread uses, without Kafka clients."""
    w = runtime.ConnectorWorker.__new__(runtime.ConnectorWorker)
    w._target = target
    w._done = queue.SimpleQueue()
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
    w._done.get(timeout=5)()  # ...and the job has its completion
    [(job_id, status, _, error)] = core.called
    assert (job_id, status) == (7, ev.OutcomeStatus.UNKNOWN)
    assert "bug in classify" in error


def test_a_call_that_succeeds_is_reported_as_such() -> None:
    target, core = MemoryTarget(), Recorder()
    w = worker(target, core)
    request = EffectRequest("acme/pay/k2", 1, "c2", "pay", {"amount": 1}, "h")
    w._call(Call(8, request, 2.0, 0))
    w._done.get(timeout=5)()
    [(job_id, status, external_id, _)] = core.called
    assert (job_id, status, external_id) == (8, ev.OutcomeStatus.SUCCEEDED, "mem-1")

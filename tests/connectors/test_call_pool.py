"""The connector's call threads (connector/calls.py), without Kafka."""

from __future__ import annotations

import threading

import pytest

from ledger_stream.connector.calls import CallPool

pytestmark = pytest.mark.timeout(30)


def test_jobs_run_at_once_up_to_the_size():
    pool, started, release = CallPool(4, "t"), threading.Semaphore(0), threading.Event()

    def job() -> None:
        started.release()
        release.wait(5)

    for _ in range(4):
        pool.submit(job)
    for _ in range(4):  # all four running together: a slow call holds only its own thread
        assert started.acquire(timeout=5)
    release.set()
    pool.close()


def test_a_job_that_raises_does_not_shrink_the_pool():
    pool, ran = CallPool(1, "t"), threading.Event()

    def bug() -> None:
        raise RuntimeError("bug")

    pool.submit(bug)
    pool.submit(ran.set)
    assert ran.wait(5)
    pool.close()


def test_close_drops_the_jobs_not_started_and_ends_the_threads():
    pool, release, ran = CallPool(1, "t"), threading.Event(), []
    pool.submit(lambda: release.wait(5))
    pool.submit(lambda: ran.append("late"))
    pool.close()
    release.set()
    for thread in pool._threads:
        thread.join(5)
        assert not thread.is_alive()
    assert ran == []
    pool.submit(lambda: ran.append("after close"))
    assert ran == []


def test_a_thread_starts_only_when_no_thread_is_idle():
    # A target that runs its calls itself leaves the pool nearly unused: the pool of a
    # connector allowed hundreds of calls in flight must not start hundreds of threads.
    pool = CallPool(64, "t")
    for _ in range(20):
        done = threading.Event()
        pool.submit(done.set)
        assert done.wait(5)
        for _ in range(100):  # the thread counts itself idle just after the job
            with pool._lock:
                if pool._idle == len(pool._threads):
                    break
            threading.Event().wait(0.01)
    assert len(pool._threads) == 1
    pool.close()

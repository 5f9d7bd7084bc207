"""The simulated processor's two guarantees: at least once, outputs are visible at once and a
crash repeats them (so it never pre-grants: two records of one pre-grant); exactly once,
outputs become visible at the commit that covers them, a crash drops the uncommitted ones,
and the first Dispatch carries the pre-grant."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ledger_lab.simulation.processor import SimProcessor
from ledger_lab.simulation.world import sim_policy
from ledger_stream.domain import events as ev
from tests.factories import intent

pytestmark = pytest.mark.timeout(30)

PREGRANT = replace(sim_policy(), pregrant_lease_ms=1_500)


def _dispatches(p: SimProcessor) -> list[ev.Dispatch]:
    return [d.event for d in p.dispatch if isinstance(d.event, ev.Dispatch)]


def _decided_crashed_and_decided_again(p: SimProcessor) -> None:
    p.append(intent(key="acme/refund/k1", at_ms=100), 100)
    p.step(100)
    p.crash()
    p.step(200)
    p.commit()


def test_at_least_once_repeats_its_dispatch_after_a_crash_and_never_pre_grants():
    p = SimProcessor(PREGRANT)
    _decided_crashed_and_decided_again(p)
    first, again = _dispatches(p)
    assert first == again and first.lease_until_ms == 0


def test_exactly_once_shows_outputs_at_their_commit_and_drops_them_at_a_crash():
    p = SimProcessor(PREGRANT, exactly_once=True)
    p.append(intent(key="acme/refund/k1", at_ms=100), 100)
    p.step(100)
    assert not p.dispatch and not p.receipts  # decided, not committed
    p.crash()
    p.step(200)
    p.commit()
    (dispatch,) = _dispatches(p)
    assert dispatch.lease_until_ms == 100 + 1_500
    assert len(p.receipts) == 1

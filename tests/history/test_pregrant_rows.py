"""What the timeline shows of the pre-grant (pure: records built in memory): a pre-granted
Dispatch names the pre-grant's end, a fenced claim says so, and the plain ones read as
before."""

from __future__ import annotations

from ledger_stream.domain import absent, decide
from ledger_stream.domain import events as ev
from ledger_stream.domain.policy import Policy
from ledger_stream.history import Located, timeline
from tests.factories import KEY, claim, intent

PREGRANT = Policy(pregrant_lease_ms=30_000)


def _dispatch(policy: Policy) -> ev.Dispatch:
    decided = decide(absent(KEY), intent(at_ms=1_000), policy, 1_000)
    (dispatch,) = [o for o in decided.outputs if isinstance(o, ev.Dispatch)]
    return dispatch


def _details(*events: object) -> list[str | None]:
    located = [Located("dispatch" if isinstance(e, ev.Dispatch) else "attempts",
                       "ledger.x", 0, n, 2_000 + n, e) for n, e in enumerate(events)]
    return [row.detail for row in timeline(located)]


def test_a_pre_granted_dispatch_and_a_fenced_claim_are_named_as_such() -> None:
    pre, plain = _dispatch(PREGRANT), _dispatch(Policy())
    assert pre.lease_until_ms == 31_000 and plain.lease_until_ms == 0
    details = _details(pre, plain, claim(fenced=True), claim())
    assert details[0] is not None and details[0].endswith(", pre-granted until 31000")
    assert details[1] is not None and "pre-granted" not in details[1]
    assert details[2:] == ["lease 10000 ms, fenced", "lease 10000 ms"]

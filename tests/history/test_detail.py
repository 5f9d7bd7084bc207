"""``history.shown_detail``: a detail written before connectors summarised their failures
shows the target's text only as its length, wherever the processor put it; the ledger's
own words and a summary stay. The details come from the real decision core fed with the
errors an old connector reported."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ledger_stream.connector.redaction import summary
from ledger_stream.connector.target import TargetError
from ledger_stream.domain import events as ev
from ledger_stream.domain.decide import decide
from ledger_stream.domain.policy import Policy
from ledger_stream.domain.state import KeyState, absent
from ledger_stream.history.detail import shown_detail
from tests import factories as f

PAN = "4111 1111 1111 1111"
OLD = f'Refused: HTTP 402 (refused): {{"error":"card_declined","message":"card {PAN}"}}'
NEW = summary(TargetError("HTTP 402 (refused), body: 57 characters withheld"))
POLICY = Policy(max_attempts=2)


def run(events: list[object]) -> list[object]:
    """Every output of the decision core for ``events``, in order."""
    state: KeyState = absent(f.KEY)
    outputs: list[object] = []
    for n, event in enumerate(events):
        decision = decide(state, event, POLICY, 1_000 * (n + 1))  # type: ignore[arg-type]
        state = decision.state
        outputs += decision.outputs
    return outputs


def outcome(status: ev.OutcomeStatus, error: str, attempt: int = 1,
            claim_id: str = "c1") -> ev.AttemptOutcome:
    return replace(f.outcome(status, attempt=attempt, claim_id=claim_id), error=error)


def held(error: str) -> list[object]:
    """Details of every path by which a connector's error reaches a receipt or an alert."""
    failed = [f.intent(), f.claim(), outcome(ev.OutcomeStatus.FAILED, error)]
    retried = [f.intent(), f.claim(), outcome(ev.OutcomeStatus.NOT_APPLIED, error),
               f.claim(2, "c2", 10_000), outcome(ev.OutcomeStatus.NOT_APPLIED, error, 2, "c2")]
    unknown = [f.intent(), f.claim(), outcome(ev.OutcomeStatus.UNKNOWN, error),
               replace(f.reconciled(ev.ReconcileStatus.UNQUERYABLE, claim_id="c1"),
                       error=error)]
    return [o for events in (failed, retried, unknown) for o in run(events)
            if isinstance(o, ev.Receipt | ev.Alert) and o.detail]


def test_an_old_target_text_is_shown_as_its_length_on_every_path() -> None:
    details = [o.detail for o in held(OLD)]
    assert sum(PAN in d for d in details) >= 5  # the old records do hold it
    shown = [shown_detail(d) for d in details]
    assert not [s for s in shown if "4111" in s], shown
    assert f"[target text withheld: {len(OLD)} characters]" in shown
    assert f"attempt 2 not applied: [target text withheld: {len(OLD)} characters]; 2 " \
        "attempts used" in shown
    assert "outcome unknown: [target text withheld" in " ".join(shown)
    assert f"target cannot be queried: [target text withheld: {len(OLD)} characters]" \
        in shown


def test_a_summary_and_the_ledgers_own_words_are_shown_unchanged() -> None:
    details = [o.detail for o in held(NEW)]
    assert details and [shown_detail(d) for d in details] == details
    for own in ("key expired", "applied per ops-ann [decision d-1]",
                "attempt 3 not called: claim withdrawn: partition revoked or stopping",
                "attempt 1 not called: lease ran out before the call",
                "2 grants in a row came too late to call: check processor lag",
                "undecodable: bad magic byte"):
        assert shown_detail(own) == own


@pytest.mark.parametrize("sneaky", [
    f"Refused [x] {PAN}",  # a bracket, then text: not a summary
    f"Refused [{PAN}]; 2 attempts used; more",
    f"lookup answered HTTP 500: {PAN}",  # an old LookupUnavailable, after its prefix
])
def test_text_that_only_looks_like_a_summary_is_withheld(sneaky: str) -> None:
    assert "4111" not in shown_detail(f"target cannot be queried: {sneaky}")
    assert "4111" not in shown_detail(f"outcome unknown: {sneaky}")


def test_what_an_agent_is_told_of_an_old_receipt_holds_no_target_text() -> None:
    from ledger_stream.langgraph.tool import receipt_summary
    from ledger_stream.sdk.errors import EffectFailed, raise_for

    (receipt,) = [o for o in run([f.intent(), f.claim(),
                                  outcome(ev.OutcomeStatus.FAILED, OLD)])
                  if isinstance(o, ev.Receipt) and o.status is ev.ReceiptStatus.FAILED]
    with pytest.raises(EffectFailed) as raised:
        raise_for(receipt)
    assert "4111" not in str(raised.value) and "withheld" in str(raised.value)
    assert "4111" not in receipt_summary(receipt)["detail"]


def test_the_policy_that_stopped_the_attempts_is_shown_after_the_target_text() -> None:
    """A receipt whose attempts ran out names the decision policy last: the target's part
    still ends before the attempts clause, and the policy is the ledger's own text."""
    own = f"attempt 2 not applied: {NEW}; 2 attempts used; policy p-0a1b2c for refund"
    assert shown_detail(own) == own
    unknown = (f"attempt 2 not applied: {NEW}; 2 attempts used, 1 of them with an unknown "
               "outcome; policy p-0a1b2c for refund")
    assert shown_detail(unknown) == unknown
    old = shown_detail(f"attempt 2 not applied: {OLD}; 2 attempts used; policy p-0a for x")
    assert old == (f"attempt 2 not applied: [target text withheld: {len(OLD)} characters]; "
                   "2 attempts used; policy p-0a for x")

"""A watcher's report (``ledger-stream watch``: a lookup whose claim id names the target it
read) settles a key only when it was found at the key's own target: another target's
record that happens to use the key is not the key's effect, which would then never be
made, and is alerted as an effect without an intent instead."""

from __future__ import annotations

import pytest

from ledger_stream.domain import events as ev
from ledger_stream.domain.effects import WATCH_CLAIM, watched_target
from ledger_stream.domain.state import Phase
from tests.domain.decisions import of, run
from tests.factories import claim, intent, outcome, reconciled

pytestmark = pytest.mark.timeout(30)

RS = ev.ReconcileStatus


def test_the_watch_claim_names_the_target():
    assert watched_target(f"{WATCH_CLAIM}payments") == "payments"
    assert watched_target("c1") is None


@pytest.mark.parametrize("setup", ["reserved", "granted"])
def test_an_effect_found_at_another_target_never_settles_the_key(setup):
    before, _ = run([intent()] + ([claim()] if setup == "granted" else []))
    assert before.target == "sandbox" and before.phase in (Phase.RESERVED, Phase.DISPATCHED)
    after, out = run([reconciled(RS.FOUND, claim_id="watch:mailer", external_id="m-1")],
                     before)
    assert after == before
    (alert,) = of(out, ev.Alert)
    assert alert.kind is ev.AlertKind.EFFECT_WITHOUT_INTENT
    assert "mailer" in alert.detail and "sandbox" in alert.detail
    assert not of(out, ev.Receipt)


def test_an_effect_found_at_the_keys_target_settles_it():
    before, _ = run([intent()])
    after, out = run([reconciled(RS.FOUND, claim_id="watch:sandbox", external_id="p-1")],
                     before)
    assert (after.phase, after.external_id) == (Phase.SUCCEEDED, "p-1")
    assert [r.key_status for r in of(out, ev.Receipt)] == [ev.ReceiptStatus.SUCCEEDED]


def test_a_key_with_no_target_recorded_is_settled_by_any_watcher():
    """A state without a target: a sealed marker written before markers kept it. There is
    nothing to compare, and a watcher of the key's own target finding its effect (a failed
    key's late effect) is far likelier than another target's record using the key: the
    lookup is taken as before."""
    before, _ = run([intent()])
    after, _ = run([reconciled(RS.FOUND, claim_id="watch:mailer", external_id="m-1")],
                   before.changed(target=""))
    assert after.phase is Phase.SUCCEEDED


@pytest.mark.parametrize("status", [ev.OutcomeStatus.SUCCEEDED, ev.OutcomeStatus.FAILED])
def test_a_sealed_key_keeps_its_target_and_is_not_settled_from_another(status):
    """Sealed after its window, a key keeps its target (found by a hostile review: the
    marker dropped it, and another target's record turned a failed key into a succeeded
    one with a late_effect)."""
    ended, _ = run([intent(), claim(), outcome(status, external_id="p-1")])
    sealed = ended.sealed()
    assert (sealed.phase, sealed.target) == (Phase.EXPIRED, "sandbox")
    after, out = run([reconciled(RS.FOUND, claim_id="watch:mailer", external_id="m-1")],
                     sealed)
    assert after == sealed
    assert [a.kind for a in of(out, ev.Alert)] == [ev.AlertKind.EFFECT_WITHOUT_INTENT]
    own, out = run([reconciled(RS.FOUND, claim_id="watch:sandbox", external_id="p-2")],
                   sealed)
    assert own.sealed_outcome == Phase.SUCCEEDED.value  # the key's own target: as before

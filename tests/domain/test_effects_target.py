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
from tests.factories import claim, intent, reconciled

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
    """A state without a target (none to compare): the lookup is taken as before."""
    before, _ = run([intent()])
    after, _ = run([reconciled(RS.FOUND, claim_id="watch:mailer", external_id="m-1")],
                   before.changed(target=""))
    assert after.phase is Phase.SUCCEEDED

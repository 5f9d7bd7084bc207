"""The watcher without a broker (a recording producer behind EventProducer's interface):
which operation key an effect maps to, what it reports, and that it reports each effect
once, again after a failed delivery."""

from __future__ import annotations

import pytest

from ledger_stream.domain import events as ev
from ledger_stream.domain.keys import reserved_tenant, tenant_of
from ledger_stream.kafka.exceptions import DeliveryFailed
from ledger_stream.watch import SeenEffect, Watcher, key_for
from ledger_stream.watch.watcher import check_template
from tests.watch.recorder import Recorder

pytestmark = pytest.mark.timeout(30)




def test_the_key_is_the_idempotency_key_or_the_template_filled_from_the_body() -> None:
    template = "acme/refund/{invoice}"
    assert key_for(SeenEffect("acme/refund/i-1", "pay_1"), template) == "acme/refund/i-1"
    assert key_for(SeenEffect("bypass-9f", "pay_2", {"invoice": "i-2"}), template) == \
        "acme/refund/i-2"
    assert key_for(SeenEffect("bypass-9f", "pay_3", {"amount": 1}), template) is None
    assert key_for(SeenEffect("bypass-9f", "pay_4", {"invoice": ""}), template) is None
    assert key_for(SeenEffect("bypass-9f", "pay_5", {"invoice": "i-5"}), None) is None


def test_each_effect_is_reported_once_and_again_after_a_failed_delivery() -> None:
    seen = [SeenEffect("acme/refund/i-1", "pay_1"),  # under its operation key: a lookup
            SeenEffect("bypass-1", "pay_2", {"invoice": "i-1"}),  # around the ledger
            SeenEffect("x-1", "pay_3", {"n": 1})]  # around it, and no key to name
    producer = Recorder()
    watcher = Watcher("sandbox", lambda: seen, producer, "acme/refund/{invoice}")  # type: ignore[arg-type]
    producer.fail_next_flush = True
    with pytest.raises(DeliveryFailed):
        watcher.poll()
    assert watcher.poll() == 3 and watcher.poll() == 0
    (role, found), (role2, around), (role3, unmapped) = producer.sent
    assert role == "attempts" and isinstance(found, ev.ReconcileResult)
    assert (found.key, found.status, found.external_id, found.claim_id) == (
        "acme/refund/i-1", ev.ReconcileStatus.FOUND, "pay_1", "watch:sandbox")
    # An effect made around the ledger never settles a key: an alert names the refund.
    assert role2 == "alerts" and around.kind is ev.AlertKind.EFFECT_WITHOUT_INTENT
    assert around.key == "acme/refund/i-1" and "pay_2" in around.detail
    assert role3 == "alerts" and unmapped.key.startswith("unmapped/sandbox/")
    assert reserved_tenant(tenant_of(unmapped.key))  # no tenant's key reads it
    assert "x-1" not in unmapped.detail and "pay_3" not in unmapped.key


def test_a_body_the_template_cannot_use_is_no_key_and_never_stops_the_watcher() -> None:
    bodies = [{"invoice": None}, {"invoice": ["a"]}, {"order": "x"}, {"invoice": "a" * 5000}]
    for template in ("acme/refund/{invoice:>4}", "acme/refund/{order[invoice]}",
                     "acme/refund/{invoice.id}", "acme/refund/{invoice}", "acme/{0}/x"):
        for body in bodies:  # none of these raises; a key too long is no key
            found = key_for(SeenEffect("bypass", "p", body), template)
            assert found is None or len(found) <= 1024
    producer = Recorder()
    seen = [SeenEffect("bypass", f"p{i}", b) for i, b in enumerate(bodies)]
    watcher = Watcher("sandbox", lambda: seen, producer, "acme/refund/{order[invoice]}")  # type: ignore[arg-type]
    assert watcher.poll() == len(bodies)


@pytest.mark.parametrize("template", [
    "acme/refund/{invoice}", "acme/refund/{invoice-id}", "{operation_key}",
    "acme/{kind}/{sep}{id}", "acme/refund/{n:06d}"])
def test_a_key_template_that_can_make_a_key_is_accepted(template: str) -> None:
    """Field names str.format takes (a dash), a field holding the whole key, several fields
    in one part (the hostile review of the start-up check found these refused)."""
    check_template(template)


def test_a_key_template_with_a_nested_field_is_refused_not_raised() -> None:
    """``{id:{w}}`` names a field inside a format spec, which no body fills: refused with
    a ValueError (the command's one line), never a KeyError traceback."""
    with pytest.raises(ValueError, match="makes no operation key: KeyError"):
        check_template("acme/refund/{id:{w}}")

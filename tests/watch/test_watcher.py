"""The watcher without a broker (a recording producer behind EventProducer's interface):
which operation key an effect maps to, what it reports, and that it reports each effect
once, again after a failed delivery."""

from __future__ import annotations

from typing import Any

import pytest

from ledger_stream.domain import events as ev
from ledger_stream.kafka.exceptions import DeliveryFailed
from ledger_stream.watch import SeenEffect, Watcher, key_for

pytestmark = pytest.mark.timeout(30)


class Recorder:
    def __init__(self) -> None:
        self.sent: list[tuple[str, Any]] = []
        self.fail_next_flush = False

    def send(self, role: str, event: Any) -> None:
        self.sent.append((role, event))

    def flush(self) -> None:
        if self.fail_next_flush:
            self.fail_next_flush = False
            self.sent.clear()
            raise DeliveryFailed("not acknowledged")


def test_the_key_is_the_idempotency_key_or_the_template_filled_from_the_body() -> None:
    template = "acme/refund/{invoice}"
    assert key_for(SeenEffect("acme/refund/i-1", "pay_1"), template) == "acme/refund/i-1"
    assert key_for(SeenEffect("bypass-9f", "pay_2", {"invoice": "i-2"}), template) == \
        "acme/refund/i-2"
    assert key_for(SeenEffect("bypass-9f", "pay_3", {"amount": 1}), template) is None
    assert key_for(SeenEffect("bypass-9f", "pay_4", {"invoice": ""}), template) is None
    assert key_for(SeenEffect("bypass-9f", "pay_5", {"invoice": "i-5"}), None) is None


def test_each_effect_is_reported_once_as_a_lookup_and_again_after_a_failed_delivery() -> None:
    seen = [SeenEffect("acme/refund/i-1", "pay_1"), SeenEffect("x-1", "pay_2", {"n": 1})]
    producer = Recorder()
    watcher = Watcher("sandbox", lambda: seen, producer, "acme/refund/{invoice}")  # type: ignore[arg-type]
    producer.fail_next_flush = True
    with pytest.raises(DeliveryFailed):
        watcher.poll()
    assert watcher.poll() == 2 and watcher.poll() == 0
    (role, found), (alert_role, alert) = producer.sent
    assert role == "attempts" and isinstance(found, ev.ReconcileResult)
    assert (found.key, found.status, found.external_id, found.claim_id) == (
        "acme/refund/i-1", ev.ReconcileStatus.FOUND, "pay_1", "watch:sandbox")
    assert alert_role == "alerts" and alert.kind is ev.AlertKind.EFFECT_WITHOUT_INTENT
    assert alert.key == "unmapped/sandbox/pay_2" and "x-1" not in alert.detail

"""The blocking Kafka reads and writes behind the gateway's routes (run off the event loop).
Alerts and the reconciliation queue read their topic to its end: O(topic), for an operator's
look, not a hot path; they run on the gateway's scan threads (scans.py)."""

from __future__ import annotations

from collections.abc import Iterator
from collections.abc import Set as AbstractSet
from typing import Any

from ledger_stream.domain import events as ev
from ledger_stream.gateway.models import AlertOut
from ledger_stream.history.detail import shown_detail
from ledger_stream.kafka.reader import tail_topic
from ledger_stream.sdk.client import LedgerClient
from ledger_stream.serde import DecodeError


def _events(client: LedgerClient, role: str) -> Iterator[tuple[int, int, Any]]:
    """(partition, offset, event) of every record of a ledger topic up to its end; a record
    that does not decode is skipped."""
    topic = client.settings.topic(role)
    for partition, offset, value in tail_topic(client.bootstrap, topic, follow=False):
        try:
            yield partition, offset, client.codec.decode(value) if value is not None else None
        except DecodeError:
            continue


def alerts(client: LedgerClient, tenant: str, kinds: AbstractSet[str],
           limit: int) -> list[AlertOut]:
    """The tenant's latest ``limit`` alerts (of ``kinds``, all when empty), in log order."""
    found: list[AlertOut] = []
    for partition, offset, alert in _events(client, "alerts"):
        if not isinstance(alert, ev.Alert) or not alert.key.startswith(f"{tenant}/"):
            continue
        if kinds and alert.kind.value not in kinds:
            continue
        found.append(AlertOut(alert_id=alert.alert_id, key=alert.key, kind=alert.kind.value,
                              detail=shown_detail(alert.detail),
                              source_event_id=alert.source_event_id,
                              at_ms=alert.at_ms, partition=partition, offset=offset))
    found.sort(key=lambda a: (a.at_ms, a.partition, a.offset))  # partitions come in turn
    return found[-limit:]


def waiting(client: LedgerClient, tenant: str) -> list[ev.Receipt]:
    """The tenant's keys waiting for an operator (their latest receipt), oldest first."""
    latest: dict[str, ev.Receipt] = {}
    for _, _, receipt in _events(client, "receipts"):
        if isinstance(receipt, ev.Receipt) and receipt.key.startswith(f"{tenant}/"):
            latest[receipt.key] = receipt
    return sorted((r for r in latest.values()
                   if r.key_status is ev.ReceiptStatus.NEEDS_RECONCILIATION),
                  key=lambda r: r.at_ms)

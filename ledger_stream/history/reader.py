"""Reading one key's records from every ledger topic, and the audit records of the freezes
of its action: only the key's partition of each (``kafka.receipts.key_records``), up to its
end at the time of the call. O(partition): what ``inspect`` and ``evidence`` do without a
view (``--scan``); the view keeps the same records by key (``view.history``)."""

from __future__ import annotations

from ledger_stream.config import Settings
from ledger_stream.domain import events as ev
from ledger_stream.domain.containment import audit_keys_covering
from ledger_stream.history.timeline import Located
from ledger_stream.kafka.receipts import key_records
from ledger_stream.serde import AvroCodec, DecodeError, make_codec

ROLES = ("intents", "attempts", "dispatch", "receipts", "alerts", "dlq", "audit")


def read_key(bootstrap: str, settings: Settings, key: str, codec: AvroCodec | None = None,
             timeout_s: float = 30.0) -> list[Located]:
    """Every record of ``key`` in the ledger topics, by topic, in offset order, then the
    audit records of the freezes that cover it (``audit_keys_covering``), when it has any
    record of its own (a key the ledger never saw has no history: []). A record that does
    not decode is kept, with ``event`` None and the reason."""
    codec = codec or make_codec(settings.connection.schema_registry_url)
    own = [located(role, record.topic, record.partition, record.offset, record.timestamp_ms,
                   record.value, codec)
           for role in ROLES for record in key_records(bootstrap, settings.topic(role), key,
                                                       timeout_s)]
    if not own:
        return []
    covering = [located("audit", record.topic, record.partition, record.offset,
                        record.timestamp_ms, record.value, codec)
                for scope in audit_keys_covering(key)
                for record in key_records(bootstrap, settings.topic("audit"), scope, timeout_s)]
    return own + freezes_only(covering)


def freezes_only(records: list[Located]) -> list[Located]:
    """The audit records of freezes and unfreezes among ``records`` (read under a
    ``~freeze/`` key): anything else there (a tenant named ``~freeze`` could own such an
    operation key) is not about the freezes covering a key, and is left out."""
    scope = (ev.AuditAction.FREEZE, ev.AuditAction.UNFREEZE)
    return [r for r in records if isinstance(r.event, ev.AuditRecord)
            and r.event.action in scope]


def located(role: str, topic: str, partition: int, offset: int, timestamp_ms: int,
            value: bytes | None, codec: AvroCodec) -> Located:
    """The record decoded where the log has it; ``event`` None (and why) when it does not
    decode or is a tombstone."""
    if value is None:
        return Located(role, topic, partition, offset, timestamp_ms, None,
                       "empty value (tombstone)")
    try:
        return Located(role, topic, partition, offset, timestamp_ms, codec.decode(value))
    except DecodeError as exc:
        return Located(role, topic, partition, offset, timestamp_ms, None,
                       f"undecodable: {exc}")

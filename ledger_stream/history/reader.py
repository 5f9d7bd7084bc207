"""Reading one key's records from every ledger topic: only the key's partition of each
(``kafka.receipts.key_records``), up to its end at the time of the call. O(partition), for an
operator's look or an incident review, not for a hot path."""

from __future__ import annotations

from ledger_stream.config import Settings
from ledger_stream.history.timeline import Located
from ledger_stream.kafka.receipts import key_records
from ledger_stream.serde import AvroCodec, DecodeError, make_codec

ROLES = ("intents", "attempts", "dispatch", "receipts", "alerts", "dlq")


def read_key(bootstrap: str, settings: Settings, key: str, codec: AvroCodec | None = None,
             timeout_s: float = 30.0) -> list[Located]:
    """Every record of ``key`` in the ledger topics, by topic, in offset order. A record that
    does not decode is kept, with ``event`` None and the reason."""
    codec = codec or make_codec(settings.schema_registry_url)
    found: list[Located] = []
    for role in ROLES:
        for record in key_records(bootstrap, settings.topic(role), key, timeout_s):
            event, error = None, ""
            try:
                event = codec.decode(record.value) if record.value is not None else None
                error = "" if record.value is not None else "empty value (tombstone)"
            except DecodeError as exc:
                error = f"undecodable: {exc}"
            found.append(Located(role, record.topic, record.partition, record.offset,
                                 record.timestamp_ms, event, error))
    return found

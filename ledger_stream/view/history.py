"""The timeline half of the view: every record of every ledger topic (intents, attempts,
dispatch, receipts, alerts, DLQ, audit), kept by operation key in the view's store, so a key's
timeline or evidence is one range read, however long the topics are.

Freshness works as for receipts: :meth:`HistoryView.fresh` asks Kafka for the end offset
(read-committed: the last stable offset) of the key's partition in every topic *after* it was
called, then waits until the view has applied them all, so an answer holds every record a
read-committed reader could see when the request began (or says it could not in time).
"""

from __future__ import annotations

import logging
import time

from confluent_kafka import KafkaException, Message
from confluent_kafka.admin import AdminClient
from prometheus_client import Counter, Gauge

from ledger_stream.domain import events as ev
from ledger_stream.domain.containment import audit_keys_covering
from ledger_stream.history.reader import ROLES, freezes_only, located
from ledger_stream.history.timeline import Located
from ledger_stream.kafka.client_config import CLIENT_CONFIG
from ledger_stream.kafka.end_offsets import EndOffsets
from ledger_stream.kafka.partitioner import partition_for
from ledger_stream.logs import log_fields
from ledger_stream.serde import AvroCodec, DecodeError
from ledger_stream.serde.exceptions import SchemaRegistryUnavailable
from ledger_stream.view.follower import TP, Follower, ReadAgain
from ledger_stream.view.store import (
    MAX_KEY,
    ViewStore,
    decision_key,
    record_key,
    record_value,
)

logger = logging.getLogger(__name__)

APPLIED = Counter("ledger_view_history_records_applied", "records written to the timeline")
SKIPPED = Counter("ledger_view_history_records_skipped",
                  "records the timeline cannot keep by key (null or oversized key)")
POSITION = Gauge("ledger_view_history_position",
                 "next offset the timeline reads, per topic and partition",
                 ["topic", "partition"])


FORMAT = "format=2"  # 2: with the decision index


class HistoryView(Follower):
    name = "timeline"

    def __init__(self, bootstrap: str, topics: dict[str, str], store: ViewStore,
                 codec: AvroCodec) -> None:
        """``topics`` maps each role of ``history.ROLES`` to its topic's name; ``codec``
        reads the attempts topic's records to index operators' decisions by id."""
        self._codec = codec
        missing = [role for role in ROLES if role not in topics]
        if missing:
            raise ValueError(f"the timeline needs every ledger topic; missing {missing}")
        self.roles = {topics[role]: role for role in ROLES}
        self._index = {topics[role]: i for i, role in enumerate(ROLES)}
        super().__init__(bootstrap, tuple(topics[role] for role in ROLES), store)
        admin = AdminClient({"bootstrap.servers": bootstrap, **CLIENT_CONFIG})
        self._ends = {topic: EndOffsets(admin, topic, count)
                      for topic, count in self.counts.items()}

    def _stored_positions(self) -> dict[TP, int]:
        return {(self.topics[i], p): offset
                for (i, p), offset in self._store.history_positions().items()
                if i < len(self.topics)}

    def _stored_ids(self) -> list[str] | None:
        """The topic ids the stored timeline came from; a store of another format (one
        written before the decision index, say) never matches, so it is rebuilt."""
        stored = self._store.history_ids()
        if stored is None:
            return None
        return stored[:-1] if stored[-1:] == [FORMAT] else [*stored, "(another format)"]

    def _reset(self, ids: list[str]) -> None:
        self._store.reset_history([*ids, FORMAT])

    def _on_position(self, topic: str, partition: int, offset: int) -> None:
        POSITION.labels(topic, str(partition)).set(offset)

    def _apply(self, messages: list[Message], moved: dict[TP, int]) -> int:
        records: dict[bytes, bytes] = {}
        for msg in messages:
            key = msg.key()
            topic, partition, offset = msg.topic(), msg.partition(), msg.offset()
            if key is None or len(key) > MAX_KEY or topic is None or partition is None \
                    or offset is None:
                SKIPPED.inc()
                continue
            _, timestamp = msg.timestamp()
            records[record_key(key, self._index[topic], partition, offset)] = record_value(
                timestamp, msg.value())
            if self.roles[topic] == "attempts":
                self._index_decision(msg.value(), records)
        self._store.apply_history(records, {(self._index[t], p): offset
                                            for (t, p), offset in moved.items()})
        APPLIED.inc(len(records))
        return len(records)

    def _index_decision(self, value: bytes | None, records: dict[bytes, bytes]) -> None:
        try:
            event = self._codec.decode(value) if value is not None else None
        except DecodeError:
            return  # not an event: nothing to index (the timeline keeps it as it is)
        except SchemaRegistryUnavailable as exc:
            raise ReadAgain(f"the schema registry is away: {exc}") from exc
        if isinstance(event, ev.OperatorResolution) and value is not None:
            tenant = event.key.split("/", 1)[0]
            index = decision_key(tenant, event.event_id)
            # The first decision under an id is the one that counts (a second one was
            # refused by whoever sent it, or came from around the ledger's tools).
            if index not in records and self._store.decision(tenant, event.event_id) is None:
                records[index] = value

    # -- answering ---------------------------------------------------------------------------

    def decision(self, tenant: str, decision_id: str, timeout_s: float,
                 ) -> tuple[bool, bytes | None]:
        """(caught up, the tenant's decision recorded under ``decision_id`` or None). Caught
        up: the view has applied every partition of the attempts topic up to its end as of
        this call."""
        topic = self.topics[ROLES.index("attempts")]
        wanted: dict[TP, int] = {}
        deadline = time.monotonic() + timeout_s
        try:
            for partition in range(self.counts[topic]):  # one request covers them all
                wanted[(topic, partition)] = self._ends[topic].get(
                    partition, patience_s=max(0.1, deadline - time.monotonic()))
            caught_up = self.wait_until(wanted, deadline - time.monotonic())
        except KafkaException as exc:
            logger.warning("cannot ask the end offsets for a decision", extra=log_fields(
                topic=topic, error=str(exc)))
            caught_up = False
        self._check()
        return caught_up, self._store.decision(tenant, decision_id)

    def records(self, key: str, codec: AvroCodec) -> list[Located]:
        """Every record of ``key`` applied so far, by topic, in offset order, then the audit
        records of the freezes that cover it (``audit_keys_covering``) when it has any of
        its own; a record that does not decode is kept with ``event`` None and the
        reason."""
        self._check()
        own = [located(ROLES[r.topic], self.topics[r.topic], r.partition, r.offset,
                       r.timestamp_ms, r.value, codec)
               for r in self._store.records(key.encode("utf-8"))]
        if not own:
            return []
        audit = ROLES.index("audit")
        covering = [r for scope in audit_keys_covering(key)
                    for r in self._store.records(scope.encode("utf-8")) if r.topic == audit]
        return own + freezes_only(
            [located("audit", self.topics[audit], r.partition, r.offset, r.timestamp_ms,
                     r.value, codec) for r in covering])

    def partitions_of(self, key: str) -> dict[TP, int]:
        """The key's partition in every followed topic, and the audit topic's partitions of
        the freezes covering it → the view's position there."""
        wanted = [(topic, partition_for(key.encode("utf-8"), count))
                  for topic, count in self.counts.items()]
        audit = self.topics[ROLES.index("audit")]
        wanted += [(audit, partition_for(scope.encode("utf-8"), self.counts[audit]))
                   for scope in audit_keys_covering(key)]
        positions = self.all_positions()
        return {tp: positions[tp] for tp in wanted}

    def fresh(self, key: str, timeout_s: float) -> bool:
        """Wait until the view holds every record of ``key`` committed when this was called;
        False when it had not within ``timeout_s`` (or the end offsets could not be asked).
        One deadline covers asking the end offsets and waiting for them."""
        deadline = time.monotonic() + timeout_s
        wanted: dict[TP, int] = {}
        for topic, partition in self.partitions_of(key):
            try:
                wanted[(topic, partition)] = self._ends[topic].get(
                    partition, patience_s=max(0.1, deadline - time.monotonic()))
            except Exception as exc:  # the broker is away: not fresh, say why in the log
                logger.warning("cannot ask the end offsets for a timeline", extra=log_fields(
                    topic=topic, partition=partition, error=str(exc)))
                return False
        return self.wait_until(wanted, deadline - time.monotonic())

"""Processors of one group on different policy revisions (one restarted on new settings,
another not yet): each batch's committed offsets name the revision that decided it, and a
processor taking a partition whose last batch another revision decided says so (a warning
and ``ledger_partitions_from_other_policy_total{revision}``), without stopping. On a real
broker: the revision travels in the offsets' metadata through the exactly-once
transaction."""

from __future__ import annotations

import logging
import uuid
from dataclasses import replace
from pathlib import Path

import pytest
from confluent_kafka import Consumer
from prometheus_client import REGISTRY

from ledger_lab.harness.records import FakeMessage
from ledger_stream.config import Settings
from ledger_stream.domain.policy import Policy
from ledger_stream.kafka.partitioner import partition_for
from ledger_stream.processor import clients
from ledger_stream.processor.assignment import Assignment
from ledger_stream.processor.batch import Batch
from ledger_stream.processor.checkpoint import Checkpoint
from ledger_stream.processor.delivery import ExactlyOnceDelivery
from ledger_stream.processor.policy import policy_from, policy_revision
from ledger_stream.processor.runtime import OUTPUT_ROLES
from ledger_stream.processor.step import LedgerStep
from ledger_stream.state.memory import MemoryPartitionStore
from tests.factories import intent
from tests.processor.fakes import CODEC

pytestmark = pytest.mark.timeout(120)
MEMBER = "member-1"
WARNING = "partitions last decided under another policy revision"


class _Member:
    """The consumer calls a checkpoint makes besides the commit (a member of the group)."""

    def memberid(self) -> str:
        return MEMBER


def _decide_and_commit(settings: Settings, policy: Policy, group: str) -> set[int]:
    """One batch decided under ``policy`` and committed exactly once for ``group``; the
    partitions it committed."""
    bootstrap = settings.kafka_bootstrap
    assert bootstrap is not None
    inputs = (settings.topic("intents"), settings.topic("attempts"))
    step = LedgerStep(policy, CODEC, {inputs[0]: "intents", inputs[1]: "attempts"},
                      settings.partitions)
    stores = {p: MemoryPartitionStore(p) for p in range(settings.partitions)}
    grouped = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    delivery = ExactlyOnceDelivery(clients.producer_settings(bootstrap, f"tx-{group}"),
                                   settings.topic("changelog"))
    checkpoint = Checkpoint(delivery, _Member(), step,  # type: ignore[arg-type]
                            {role: settings.topic(role) for role in OUTPUT_ROLES},
                            group, "one")
    batch = Batch(step, stores, {}, inputs, MEMBER,  # type: ignore[arg-type]
                  group_metadata=grouped.consumer_group_metadata())
    events = [intent(f"acme/pay/k{i}") for i in range(4)]
    batch.add_all([FakeMessage(inputs[0], partition_for(e.key.encode(), settings.partitions),
                               i, 1_000 + i, e.key.encode(), CODEC.encode(e))
                   for i, e in enumerate(events)])
    try:
        checkpoint.run(batch)
    finally:
        delivery.close()
        grouped.close()
    return {partition_for(e.key.encode(), settings.partitions) for e in events}


def _taken_by(settings: Settings, policy: Policy, group: str) -> None:
    """A processor under ``policy`` reads the group's committed offsets, as it does when
    the group gives it every partition."""
    bootstrap = settings.kafka_bootstrap
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                       "isolation.level": "read_committed"})
    assignment = Assignment(None, None, policy,  # type: ignore[arg-type]
                            (settings.topic("intents"), settings.topic("attempts")),
                            settings.topic("changelog"), group, None)  # type: ignore[arg-type]
    try:
        assignment._read_committed(reader, list(range(settings.partitions)))
    finally:
        reader.close()


def _counted(revision: str) -> float:
    return REGISTRY.get_sample_value("ledger_partitions_from_other_policy_total",
                                     {"revision": revision}) or 0.0


def test_a_partition_last_decided_under_another_revision_is_said(
        ledger_topics: Settings, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    old = policy_from(ledger_topics)
    changed = replace(old, max_attempts=old.max_attempts + 1)  # one knob changed
    new = replace(changed, revision=policy_revision(changed))
    assert old.revision != new.revision
    group = f"g-{uuid.uuid4().hex[:8]}"
    decided = _decide_and_commit(ledger_topics, old, group)
    caplog.set_level(logging.WARNING, "ledger_stream.processor.assignment")
    before = _counted(old.revision)

    _taken_by(ledger_topics, old, group)  # the same revision: nothing to say
    assert not [r for r in caplog.records if r.getMessage() == WARNING]

    _taken_by(ledger_topics, new, group)  # a processor restarted on the new settings
    (said,) = [r for r in caplog.records if r.getMessage() == WARNING]
    fields = said.fields  # type: ignore[attr-defined]
    assert fields == {"partitions": sorted(decided), "revision": old.revision,
                      "policy_revision": new.revision}
    assert _counted(old.revision) - before == len(decided)

"""The ledger's topics (docs/design.md, 'Topics and events') as data, and their idempotent creation.

All eight share one partition count, so one operation key's intents, attempts, dispatches,
state and audit records meet in the same partition number. History topics are compacted,
but only after the replay window and a margin for processor lag (``min.compaction.lag.ms``),
so a key's full history survives the window;
receipts keep the latest per key; alerts, the DLQ and the audit topic (who did what as an
operator, operate/audit.py) are kept by time; the changelog (the processor's state backup)
keeps the latest row per key.

The input topics are stamped by the broker (``message.timestamp.type=LogAppendTime``): the
processor's partition clock, which decides leases and deadlines, then comes from one clock
no client sets.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType

from ledger_stream.config import DAY_MS, Settings
from ledger_stream.kafka.client_config import CLIENT_CONFIG
from ledger_stream.kafka.exceptions import KafkaSetupError, TopicConfigMismatch
from ledger_stream.kafka.reach import admin_answer

LONG_RETENTION_MS = 90 * DAY_MS
HISTORY_TOPICS = ("intents", "attempts", "dispatch")  # compact after the replay window
INPUT_TOPICS = ("intents", "attempts")  # stamped by the broker: the partition clock
AUDIT_TOPICS = ("audit",)  # stamped by the broker too: "when" is no client's clock
LATEST_TOPICS = ("receipts",)  # compact: the latest receipt per key
RECORD_TOPICS = ("alerts", "dlq", "audit")  # delete after a long retention
STATE_TOPICS = ("changelog",)  # compact: the processor's latest row per key
LEDGER_TOPICS = HISTORY_TOPICS + LATEST_TOPICS + RECORD_TOPICS + STATE_TOPICS
LOG_APPEND_TIME = {"message.timestamp.type": "LogAppendTime"}
# A changelog row of a batch that crashed before its commit may be a key's newest record
# until the retried batch writes its own; the lag keeps the older, committed row that long.
CHANGELOG_COMPACTION_LAG_MS = 3_600_000


@dataclass(frozen=True)
class TopicSpec:
    """One topic as the ledger needs it. ``config`` holds every setting the ledger manages."""

    name: str
    partitions: int
    replication_factor: int
    config: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class TopicReport:
    """What :func:`create_topics` found or did for one topic."""

    topic: str
    status: Literal["created", "exists", "differs"]
    differences: tuple[str, ...] = ()

    def line(self) -> str:
        if self.status == "differs":
            return f"{self.topic}: DIFFERS: {'; '.join(self.differences)}"
        return f"{self.topic}: {self.status}"


def ledger_topics(settings: Settings) -> tuple[TopicSpec, ...]:
    """The eight ledger topics named with ``settings.topics.prefix``."""
    shared: dict[str, str] = {}
    if settings.topics.replication_factor >= 3:
        shared["min.insync.replicas"] = "2"
    # A record may be compacted away once a newer one of its key exists and it is older
    # than the lag: the replay window plus a margin for a processor that fell behind (an
    # intent compacted before the processor read it would be lost without a trace, and a
    # later conflicting one could reserve its key).
    lag = settings.topics.replay_window_ms + settings.topics.compaction_margin_ms
    history = {"cleanup.policy": "compact", "min.compaction.lag.ms": str(lag)}
    latest = {"cleanup.policy": "compact"}
    records = {"cleanup.policy": "delete", "retention.ms": str(LONG_RETENTION_MS)}
    state = {"cleanup.policy": "compact",
             "min.compaction.lag.ms": str(CHANGELOG_COMPACTION_LAG_MS)}
    configs = {
        **dict.fromkeys(HISTORY_TOPICS, history),
        **{name: {**history, **LOG_APPEND_TIME} for name in INPUT_TOPICS},
        **dict.fromkeys(LATEST_TOPICS, latest),
        **dict.fromkeys(RECORD_TOPICS, records),
        **{name: {**records, **LOG_APPEND_TIME} for name in AUDIT_TOPICS},
        **dict.fromkeys(STATE_TOPICS, state),
    }
    return tuple(
        TopicSpec(
            settings.topic(name),
            settings.topics.partitions,
            settings.topics.replication_factor,
            {**configs[name], **shared},
        )
        for name in LEDGER_TOPICS
    )


def create_topics(bootstrap: str, settings: Settings, timeout_s: float = 30.0) -> list[TopicReport]:
    """Create the missing ledger topics and compare the existing ones; alter nothing.

    Idempotent: a second call reports every topic as ``exists``. Returns once the broker
    serves the created topics' metadata (a client started right after finds them). An
    existing topic whose partition count, replication factor or managed configs differ
    from ``settings`` is reported as ``differs`` with each difference. Raises
    KafkaSetupError when the cluster does not answer within ``timeout_s`` or refuses a
    creation (e.g. replication factor larger than the broker count).
    """
    specs = ledger_topics(settings)
    # log_level 4: warnings and errors only; librdkafka's info lines are noise on a CLI.
    admin = AdminClient({"bootstrap.servers": bootstrap, **CLIENT_CONFIG})
    try:
        existing = set(admin.list_topics(timeout=timeout_s).topics)
    except KafkaException as exc:
        raise KafkaSetupError(f"Kafka at {bootstrap} did not answer: {exc}") from exc
    missing = [spec for spec in specs if spec.name not in existing]
    created = _create(admin, missing, timeout_s)
    if created:  # usable when this returns: a client asking right after finds them
        _metadata(admin, created, timeout_s)
    reports = [TopicReport(name, "created") for name in created]
    to_compare = [spec for spec in specs if spec.name not in created]
    reports += _compare(admin, to_compare, timeout_s)
    order = {spec.name: i for i, spec in enumerate(specs)}
    return sorted(reports, key=lambda report: order[report.topic])


def require_matching(reports: Iterable[TopicReport]) -> None:
    """Raise TopicConfigMismatch when any report says ``differs``."""
    differing = {r.topic: r.differences for r in reports if r.status == "differs"}
    if differing:
        raise TopicConfigMismatch(differing)


def _create(admin: AdminClient, specs: list[TopicSpec], timeout_s: float) -> set[str]:
    """Create ``specs``; return the names this call created (a topic created concurrently
    by someone else is left to the comparison)."""
    if not specs:
        return set()
    new_topics = [
        NewTopic(s.name, s.partitions, s.replication_factor, config=dict(s.config)) for s in specs
    ]
    futures = admin.create_topics(
        new_topics, operation_timeout=timeout_s, request_timeout=timeout_s
    )
    created = set()
    for name, future in futures.items():
        try:
            future.result()
        except KafkaException as exc:
            if exc.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS:
                continue
            raise KafkaSetupError(f"creating topic {name} failed: {exc.args[0].str()}") from exc
        created.add(name)
    return created


def _compare(admin: AdminClient, specs: list[TopicSpec], timeout_s: float) -> list[TopicReport]:
    if not specs:
        return []
    metadata = _metadata(admin, {spec.name for spec in specs}, timeout_s)
    reports = []
    for spec in specs:
        actual = _describe(admin, spec.name, timeout_s)
        partitions = metadata[spec.name].partitions
        replicas = len(partitions[0].replicas) if partitions else 0
        differences = _differences(spec, len(partitions), replicas, actual)
        reports.append(TopicReport(spec.name, "differs" if differences else "exists", differences))
    return reports


def _metadata(admin: AdminClient, names: set[str], timeout_s: float) -> dict[str, Any]:
    """Metadata of ``names``: a topic that exists (its creation said so) may be missing
    from a broker's metadata for a moment; asked again until ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        topics = admin.list_topics(timeout=timeout_s).topics
        missing = names - set(topics)
        if not missing:
            return dict(topics)
        if time.monotonic() > deadline:
            raise KafkaSetupError(f"topics {sorted(missing)} exist but have no metadata")
        time.sleep(0.1)


def _describe(admin: AdminClient, topic: str, timeout_s: float) -> dict[str, str | None]:
    """The topic's configs. A topic created a moment ago may be listed before every broker
    can describe it (UNKNOWN_TOPIC_OR_PART): asked again until ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    resource = ConfigResource(ResourceType.TOPIC, topic)
    while True:
        try:
            future = admin.describe_configs([resource], request_timeout=timeout_s)[resource]
            entries = admin_answer(admin, future, timeout_s, None, f"describing topic {topic}")
            return {name: entry.value for name, entry in entries.items()}
        except TimeoutError as exc:
            raise KafkaSetupError(f"describing topic {topic}: no answer within "
                                  f"{timeout_s:g} s") from exc
        except KafkaException as exc:
            unknown = exc.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART
            if not unknown or time.monotonic() > deadline:
                raise KafkaSetupError(f"describing topic {topic} failed: {exc}") from exc
            time.sleep(0.1)


def _differences(
    spec: TopicSpec, partitions: int, replicas: int, actual: Mapping[str, str | None]
) -> tuple[str, ...]:
    found = []
    if partitions != spec.partitions:
        found.append(f"partitions {partitions}, expected {spec.partitions}")
    if replicas != spec.replication_factor:
        found.append(f"replication factor {replicas}, expected {spec.replication_factor}")
    for name, wanted in spec.config.items():
        if actual.get(name) != wanted:
            found.append(f"{name}={actual.get(name)}, expected {wanted}")
    return tuple(found)

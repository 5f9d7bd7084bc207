"""The ledger topics (docs/design.md, 'Topics and events'): created with the right
policies, idempotently."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType

from ledger_stream.cli.common import CliError
from ledger_stream.cli.main import build_parser, main
from ledger_stream.config import DAY_MS, Settings
from ledger_stream.kafka.exceptions import TopicConfigMismatch
from ledger_stream.kafka.topics import (
    CHANGELOG_COMPACTION_LAG_MS,
    LEDGER_TOPICS,
    LONG_RETENTION_MS,
    create_topics,
    ledger_topics,
    require_matching,
)


def _describe(bootstrap: str, topic: str) -> tuple[int, dict[str, str]]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    partitions = len(admin.list_topics(topic, timeout=10).topics[topic].partitions)
    resource = ConfigResource(ResourceType.TOPIC, topic)
    entries = admin.describe_configs([resource])[resource].result(10)
    return partitions, {name: entry.value for name, entry in entries.items()}


@pytest.mark.kafka
@pytest.mark.timeout(60)
def test_topics_are_created_with_their_cleanup_policies(ledger_settings: Settings) -> None:
    bootstrap = ledger_settings.kafka_bootstrap
    assert bootstrap is not None
    reports = create_topics(bootstrap, ledger_settings)
    assert [(r.topic, r.status) for r in reports] == [
        (ledger_settings.topic(name), "created") for name in LEDGER_TOPICS
    ]
    lag = str(ledger_settings.replay_window_ms + ledger_settings.compaction_margin_ms)
    for name in ("intents", "attempts", "dispatch"):
        partitions, config = _describe(bootstrap, ledger_settings.topic(name))
        assert partitions == 3
        assert (config["cleanup.policy"], config["min.compaction.lag.ms"]) == ("compact", lag)
        # The inputs are stamped by the broker: the processor's partition clock.
        stamped = "LogAppendTime" if name != "dispatch" else "CreateTime"
        assert config["message.timestamp.type"] == stamped
    partitions, config = _describe(bootstrap, ledger_settings.topic("changelog"))
    assert (partitions, config["cleanup.policy"]) == (3, "compact")
    assert config["min.compaction.lag.ms"] == str(CHANGELOG_COMPACTION_LAG_MS)
    partitions, config = _describe(bootstrap, ledger_settings.topic("receipts"))
    assert (partitions, config["cleanup.policy"]) == (3, "compact")
    for name in ("alerts", "dlq"):
        partitions, config = _describe(bootstrap, ledger_settings.topic(name))
        assert partitions == 3
        assert (config["cleanup.policy"], config["retention.ms"]) == ("delete", str(90 * DAY_MS))


@pytest.mark.kafka
@pytest.mark.timeout(60)
def test_create_twice_reports_exists(ledger_topics: Settings) -> None:
    assert ledger_topics.kafka_bootstrap is not None
    reports = create_topics(ledger_topics.kafka_bootstrap, ledger_topics)
    assert {r.status for r in reports} == {"exists"}
    require_matching(reports)


@pytest.mark.kafka
@pytest.mark.timeout(60)
def test_existing_topic_with_other_settings_is_reported_not_altered(
    ledger_settings: Settings,
) -> None:
    bootstrap = ledger_settings.kafka_bootstrap
    assert bootstrap is not None
    intents = ledger_settings.topic("intents")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    by_hand = NewTopic(intents, 1, 1, config={"cleanup.policy": "delete"})
    admin.create_topics([by_hand])[intents].result(30)

    reports = {r.topic: r for r in create_topics(bootstrap, ledger_settings)}

    assert reports[intents].status == "differs"
    assert "partitions 1, expected 3" in reports[intents].differences
    assert "cleanup.policy=delete, expected compact" in reports[intents].differences
    assert any(d.startswith("min.compaction.lag.ms=") for d in reports[intents].differences)
    assert "DIFFERS" in reports[intents].line()
    assert reports[ledger_settings.topic("dlq")].status == "created"
    assert _describe(bootstrap, intents)[0] == 1  # reported, never altered
    with pytest.raises(TopicConfigMismatch, match="partitions 1, expected 3"):
        require_matching(reports.values())


@pytest.mark.timeout(10)
def test_the_ledger_has_eight_topics_the_changelog_last() -> None:
    specs = ledger_topics(Settings(topic_prefix="x", partitions=5))
    assert [spec.name for spec in specs] == [
        "x.intents", "x.attempts", "x.dispatch", "x.receipts", "x.alerts", "x.dlq",
        "x.audit", "x.changelog"]
    audit = next(spec for spec in specs if spec.name == "x.audit")
    assert audit.config["cleanup.policy"] == "delete"
    assert int(audit.config["retention.ms"]) >= 90 * 86_400_000
    assert {spec.partitions for spec in specs} == {5}
    stamped = {spec.name for spec in specs
               if spec.config.get("message.timestamp.type") == "LogAppendTime"}
    assert stamped == {"x.intents", "x.attempts", "x.audit"}


@pytest.mark.timeout(10)
def test_replicated_topics_require_two_in_sync_replicas() -> None:
    replicated = ledger_topics(Settings(replication_factor=3, partitions=6))
    assert {spec.config["min.insync.replicas"] for spec in replicated} == {"2"}
    assert {(spec.partitions, spec.replication_factor) for spec in replicated} == {(6, 3)}
    single = ledger_topics(Settings(replication_factor=1))
    assert all("min.insync.replicas" not in spec.config for spec in single)
    assert LONG_RETENTION_MS == 90 * DAY_MS


@pytest.mark.timeout(30)
def test_topics_create_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["topics", "create", "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert "LEDGER_PARTITIONS" in out and "LEDGER_REPLICATION_FACTOR" in out
    assert "LEDGER_KAFKA_BOOTSTRAP" in out


@pytest.mark.timeout(30)
def test_topics_create_bad_flag_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["topics", "create", "--partitions", "many"])
    assert exit_info.value.code == 2
    assert "invalid int value" in capsys.readouterr().err


@pytest.mark.timeout(30)
def test_topics_create_without_kafka_says_how_to_get_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("LEDGER_KAFKA_BOOTSTRAP", raising=False)
    args = build_parser().parse_args(["topics", "create", "--home", str(tmp_path)])
    with pytest.raises(
        CliError, match="run `ledger-stream kafka up` or set LEDGER_KAFKA_BOOTSTRAP"
    ):
        args.handler(args)

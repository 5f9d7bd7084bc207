"""The ledger's topics: their names, layout and how long they keep what they hold."""

from __future__ import annotations

import re

from pydantic import Field, field_validator

from ledger_stream.settings.group import DAY_MS, MAX_MS, SettingsGroup, flat_config

# Kafka takes topic names of at most 249 of these characters; the longest ledger topic adds
# ".changelog" to the prefix (tests/test_config_file.py checks every topic against it).
TOPIC_CHARACTERS = re.compile(r"[A-Za-z0-9._-]+")
PREFIX_MAX = 249 - len(".changelog")
# Partitions of each ledger topic: Kafka's CreateTopics takes an int32, but a cluster holds a
# few hundred thousand partitions in all and the ledger creates several topics this wide;
# 10,000 is beyond any ledger's need and keeps a typo from asking a broker for millions.
MAX_PARTITIONS = 10_000
# A replication factor is an int16 in Kafka's CreateTopics.
MAX_REPLICATION_FACTOR = 2**15 - 1


class TopicSettings(SettingsGroup):
    """Names and layout every process of one ledger must agree on."""

    model_config = flat_config(prefix="topic_prefix")

    prefix: str = Field("ledger", description="prefix of every ledger topic")
    partitions: int = Field(12, ge=1, le=MAX_PARTITIONS,
        description="partition count shared by all ledger topics")
    replication_factor: int = Field(1, ge=1, le=MAX_REPLICATION_FACTOR,
        description="replication factor of ledger topics")
    replay_window_ms: int = Field(
        7 * DAY_MS, ge=1, le=MAX_MS, description="how long a terminal key stays authoritative"
    )
    compaction_margin_ms: int = Field(
        7 * DAY_MS, ge=0, le=MAX_MS,
        description="how much longer than the replay window the history "
        "topics keep every record of a key before compaction may drop the older ones: a "
        "processor that falls further behind could find an intent it never read compacted "
        "away (alerted at half of it: LedgerProcessorNearCompaction)")

    @field_validator("prefix")
    @classmethod
    def _a_kafka_name(cls, prefix: str) -> str:
        """Refused at once, not when a broker refuses the first topic (or a command waits
        for a topic that cannot exist)."""
        if not TOPIC_CHARACTERS.fullmatch(prefix):
            raise ValueError("a topic prefix takes letters, digits, '.', '_' and '-' only, "
                             "at least one (Kafka's topic names)")
        if len(prefix) > PREFIX_MAX:
            raise ValueError(f"a topic prefix takes at most {PREFIX_MAX} characters (Kafka's "
                             "topic names take 249, and the longest ledger topic adds "
                             "'.changelog')")
        return prefix

    def name(self, topic: str) -> str:
        """Full name of a ledger topic, e.g. ``name("intents") == "ledger.intents"``."""
        return f"{self.prefix}.{topic}"

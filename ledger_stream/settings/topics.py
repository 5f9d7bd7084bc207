"""The ledger's topics: their names, layout and how long they keep what they hold."""

from __future__ import annotations

from pydantic import Field

from ledger_stream.settings.group import DAY_MS, SettingsGroup, flat_config


class TopicSettings(SettingsGroup):
    """Names and layout every process of one ledger must agree on."""

    model_config = flat_config(prefix="topic_prefix")

    prefix: str = Field("ledger", description="prefix of every ledger topic")
    partitions: int = Field(12, ge=1, description="partition count shared by all ledger topics")
    replication_factor: int = Field(1, ge=1, description="replication factor of ledger topics")
    replay_window_ms: int = Field(
        7 * DAY_MS, ge=1, description="how long a terminal key stays authoritative"
    )
    compaction_margin_ms: int = Field(
        7 * DAY_MS, ge=0, description="how much longer than the replay window the history "
        "topics keep every record of a key before compaction may drop the older ones: a "
        "processor that falls further behind could find an intent it never read compacted "
        "away (alerted at half of it: LedgerProcessorNearCompaction)")

    def name(self, topic: str) -> str:
        """Full name of a ledger topic, e.g. ``name("intents") == "ledger.intents"``."""
        return f"{self.prefix}.{topic}"

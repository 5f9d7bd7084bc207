"""What every process shares: its home folder, logs, traces, /metrics address, and the
local broker a command starts when no cluster is named."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator

from ledger_stream.logs import level_name
from ledger_stream.settings.group import SettingsGroup, flat_config


def default_home() -> Path:
    """``$XDG_CACHE_HOME/ledger-stream`` (``~/.cache/ledger-stream`` without it)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "ledger-stream"


def shared_jar_cache() -> Path:
    """The user's one Kafka jar cache, whatever HOME a command is given: a cluster started
    with ``--home DIR`` reuses the jars instead of fetching them again."""
    return default_home() / "jars"


class ProcessSettings(SettingsGroup):
    """Where a process keeps its files and how it reports."""

    home: Path = Field(default_factory=default_home, description="cache for jars and broker data")
    metrics_host: str = Field(
        "127.0.0.1", description="address every /metrics listener binds (processor, "
        "connector); not a loopback address also lets the view and the gateway answer "
        "/metrics to peers beyond this host")
    log_level: str = Field("INFO", description="log level: DEBUG, INFO, WARNING, ERROR or "
                           "CRITICAL")
    tracing: Literal["off", "otlp"] = Field(
        "off", description="export this process's spans: off, or otlp (the tracing extra; "
        "OTEL_EXPORTER_OTLP_* say where)")

    @field_validator("log_level")
    @classmethod
    def _known_level(cls, value: str) -> str:
        return level_name(value)


class LocalKafkaSettings(SettingsGroup):
    """The broker a command starts on this machine when no cluster is named."""

    model_config = flat_config(version="kafka_version")

    version: str = Field("4.1.1", description="Apache Kafka version of the local broker")
    jar_cache: Path | None = Field(None, description="Kafka jar cache (default: the user's "
                                   "~/.cache/ledger-stream/jars, shared by every HOME)")

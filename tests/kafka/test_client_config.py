"""The properties every Kafka client of the process shares: the project's defaults hold
until a deployment overrides them, and come back when it no longer does."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ledger_stream.kafka.client_config import CLIENT_CONFIG, DEFAULTS, use_client_settings


@pytest.fixture(autouse=True)
def restored() -> Iterator[None]:
    yield
    use_client_settings({})


def test_the_defaults_hold_until_overridden_and_come_back_after() -> None:
    assert CLIENT_CONFIG["reconnect.backoff.ms"] == DEFAULTS["reconnect.backoff.ms"] == 20
    use_client_settings({"reconnect.backoff.ms": "250", "security.protocol": "SSL"})
    assert CLIENT_CONFIG["reconnect.backoff.ms"] == "250"
    assert CLIENT_CONFIG["security.protocol"] == "SSL"
    use_client_settings({})
    assert CLIENT_CONFIG["reconnect.backoff.ms"] == 20
    assert "security.protocol" not in CLIENT_CONFIG
    assert {"logger", "log_level"} <= set(CLIENT_CONFIG)

"""Real servers for the connector tests: one SMTP server per test, stopped by PID at the
end, whether it passed or not (PostgreSQL: tests/conftest.py); a whole stack whose processor
pre-grants (the pre-grant is off by default).

Tests that use them carry the ``postgres`` or ``smtp`` marker (``-m "not postgres"``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ledger_lab.harness.stack import Stack
from ledger_stream.config import Settings
from tests.smtp_harness import SmtpServerProc


@pytest.fixture
def smtp_server(tmp_path: Path) -> Iterator[SmtpServerProc]:
    """A fresh SMTP server with an empty ledger, stopped after the test."""
    server = SmtpServerProc(tmp_path / "smtp")
    try:
        yield server
    finally:
        server.stop()


def _pregranting(settings: Settings, tmp_path: Path, lease_ms: int) -> Iterator[Stack]:
    stack = Stack(settings, tmp_path, processor_env={"LEDGER_PREGRANT_LEASE_MS": str(lease_ms)})
    try:
        yield stack
    finally:
        stack.close()


@pytest.fixture
def pregrant_stack(ledger_topics: Settings, tmp_path: Path) -> Iterator[Stack]:
    """A stack whose processor pre-grants for 30 s."""
    yield from _pregranting(ledger_topics, tmp_path, 30_000)


@pytest.fixture
def short_pregrant_stack(ledger_topics: Settings, tmp_path: Path) -> Iterator[Stack]:
    """A stack whose processor pre-grants for 8 s: a dispatch a rebalance turned into
    backlog is Held until its pre-grant ends, and the records behind it in its partition
    wait for it (the commit frontier); 8 s keeps that wait short."""
    yield from _pregranting(ledger_topics, tmp_path, 8_000)

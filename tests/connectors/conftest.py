"""Real servers for the connector tests: one SMTP server per test, stopped by PID at the
end, whether it passed or not (PostgreSQL: tests/conftest.py).

Tests that use them carry the ``postgres`` or ``smtp`` marker (``-m "not postgres"``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.smtp_harness import SmtpServerProc


@pytest.fixture
def smtp_server(tmp_path: Path) -> Iterator[SmtpServerProc]:
    """A fresh SMTP server with an empty ledger, stopped after the test."""
    server = SmtpServerProc(tmp_path / "smtp")
    try:
        yield server
    finally:
        server.stop()

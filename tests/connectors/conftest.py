"""Real servers for the connector tests: one PostgreSQL for the run (a fresh database per
test) and one SMTP server per test, each stopped by PID at the end, whether it passed or not.

Tests that use them carry the ``postgres`` or ``smtp`` marker (``-m "not postgres"``).
"""

from __future__ import annotations

import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

from ledger_stream.testing.postgres import PostgresServer
from tests.smtp_harness import SmtpServerProc


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """One PostgreSQL server for the run, removed at the end (data folder included)."""
    started = time.monotonic()
    server = PostgresServer()
    try:
        server.start()
        print(f"[postgres fixture] ready on port {server.port} in "
              f"{time.monotonic() - started:.1f}s", file=sys.stderr, flush=True)
        yield server
    finally:
        server.remove()


@pytest.fixture
def postgres_dsn(postgres_server: PostgresServer) -> Iterator[str]:
    """A DSN to a database of its own (``t_<hex>``), dropped after the test."""
    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_server.dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    yield make_conninfo(postgres_server.dsn, dbname=name)
    try:
        with psycopg.connect(postgres_server.dsn, autocommit=True, connect_timeout=5) as admin:
            admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)")
                          .format(sql.Identifier(name)))
    except psycopg.OperationalError:
        pass  # the server is down (a crash test); the run's teardown removes it anyway


@pytest.fixture
def smtp_server(tmp_path: Path) -> Iterator[SmtpServerProc]:
    """A fresh SMTP server with an empty ledger, stopped after the test."""
    server = SmtpServerProc(tmp_path / "smtp")
    try:
        yield server
    finally:
        server.stop()

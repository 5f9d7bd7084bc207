"""Shared fixtures: one real Kafka broker for the whole run, and per-test ledger topics.

Set LEDGER_KAFKA_BOOTSTRAP to run the broker tests against an existing cluster; otherwise a
single-node local cluster is started once in a temporary folder (jars from the usual cache,
fetched once) and stopped by PID when the run ends, whether it passed or not.
"""

from __future__ import annotations

import os
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from confluent_kafka.admin import AdminClient
from psycopg import sql
from psycopg.conninfo import make_conninfo

from ledger_lab.harness.approvers import approver_env
from ledger_lab.harness.postgres import PostgresServer
from ledger_lab.harness.sandbox import SandboxProc
from ledger_lab.harness.stack import Stack
from ledger_lab.local_kafka import LocalCluster, ensure_jars, jar_cache
from ledger_stream.config import Settings
from ledger_stream.kafka import producer, topics
from tests.model import background as model_background
from tests.simulation import background

# Commands run in-process configure logging as a process would: each test restores it.
pytest_plugins = ["tests.logging_state"]

BROKER_FIXTURES = {"kafka_bootstrap", "ledger_settings", "ledger_topics"}

# Every process the tests start trusts the test approver's public key (processes refuse to
# start without an approver key outside development mode); tests sign with TEST_APPROVER.
os.environ.setdefault("LEDGER_APPROVAL_PUBLIC_KEYS", approver_env()["LEDGER_APPROVAL_PUBLIC_KEYS"])


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test that needs the broker carries the ``kafka`` marker (``-m "not kafka"``)."""
    for item in items:
        if BROKER_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.kafka)


def pytest_collection_finish(session: pytest.Session) -> None:
    nodeids = [item.nodeid for item in session.items]
    background.start_if_selected(nodeids)
    model_background.start_if_selected(nodeids)


def pytest_sessionfinish(session: pytest.Session) -> None:
    background.stop()
    model_background.stop()


def _progress(line: str) -> None:
    print(f"[kafka fixture] {line}", file=sys.stderr, flush=True)


@pytest.fixture(scope="session")
def kafka_bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Bootstrap address of the run's Kafka: LEDGER_KAFKA_BOOTSTRAP, or a local 1-node cluster."""
    settings = Settings()
    if settings.kafka_bootstrap:
        yield settings.kafka_bootstrap
        return
    libs = ensure_jars(jar_cache(settings), settings.kafka_version, progress=_progress)
    cluster = LocalCluster(tmp_path_factory.mktemp("kafka-cluster"), progress=_progress)
    try:
        status = cluster.start(libs, settings.kafka_version, nodes=1)
        assert status.bootstrap is not None
        yield status.bootstrap
    finally:
        cluster.stop()


@pytest.fixture
def ledger_settings(kafka_bootstrap: str) -> Settings:
    """Settings for one test: its own topic prefix ``t-<8 hex>``, 3 partitions, the run's Kafka."""
    return Settings(
        kafka_bootstrap=kafka_bootstrap,
        topic_prefix=f"t-{uuid.uuid4().hex[:8]}",
        partitions=3,
        replication_factor=1,
    )


@pytest.fixture
def ledger_topics(ledger_settings: Settings) -> Iterator[Settings]:
    """``ledger_settings`` with its ledger topics created (deleted again afterwards)."""
    bootstrap = ledger_settings.kafka_bootstrap
    assert bootstrap is not None
    topics.require_matching(topics.create_topics(bootstrap, ledger_settings))
    yield ledger_settings
    admin = AdminClient({"bootstrap.servers": bootstrap})
    names = [spec.name for spec in topics.ledger_topics(ledger_settings)]
    for future in admin.delete_topics(names, operation_timeout=30).values():
        future.result()


@pytest.fixture
def sandbox(tmp_path: Path) -> Iterator[SandboxProc]:
    """A payments sandbox of this test's own (its ledger is the ground truth of effects)."""
    proc = SandboxProc(tmp_path / "sandbox.db")
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture
def stack(ledger_topics: Settings, tmp_path: Path) -> Iterator[Stack]:
    """A processor on this test's topics; connectors are added by the test."""
    s = Stack(ledger_topics, tmp_path)
    try:
        yield s
    finally:
        s.close()


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


@pytest.fixture(autouse=True)
def _producing_allowed_after_each_test(monkeypatch: pytest.MonkeyPatch) -> None:
    """A dry-run command run in-process (``replay-plan``, ``upgrade-check``) forbids this
    process to produce for good, as it should in its own process; the tests that call it
    in-process must not leave every later test unable to submit."""
    monkeypatch.setattr(producer, "_forbidden", "")

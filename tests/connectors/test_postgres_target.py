"""PostgresTarget against a real PostgreSQL: the Target contract, then the failure phases.

Effects are counted in the effect table (``refunds``), which has no unique constraint of
its own, so only the receipt row stands between a second call and a second effect.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psycopg
import pytest

from connectors.postgres import (
    Phase,
    PostgresNotApplied,
    PostgresOutcomeUnknown,
    PostgresRejected,
    PostgresTarget,
)
from ledger_lab.harness.postgres import PostgresServer
from ledger_lab.local_kafka.ports import pick_free_ports
from ledger_stream.connector.target import LookupUnavailable, Target
from ledger_stream.domain.events import OutcomeStatus
from ledger_stream.testing.targets import DeduplicatingTargetContract, request

pytestmark = [pytest.mark.timeout(60), pytest.mark.postgres]

REFUND_SQL = "INSERT INTO refunds (operation_key, amount) VALUES (%(ledger_key)s, %(amount)s)"


def make_target(dsn: str, effect_sql: str = REFUND_SQL) -> PostgresTarget:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS refunds (operation_key text NOT NULL,"
                     " amount integer NOT NULL CHECK (amount > 0))")
    target = PostgresTarget("pg", dsn, effect_sql)
    target.ensure_schema()
    return target


def count(dsn: str, query: str, *params: object) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(query, params).fetchone()
    assert row is not None
    return int(row[0])


def refunds(target: PostgresTarget, key: str) -> int:
    return count(target.dsn, "SELECT count(*) FROM refunds WHERE operation_key = %s", key)


def receipts(target: PostgresTarget, key: str) -> int:
    return count(target.dsn, "SELECT count(*) FROM ledger_receipts WHERE operation_key = %s",
                 key)


class TestPostgresTarget(DeduplicatingTargetContract):
    @pytest.fixture
    def target(self, postgres_dsn: str) -> PostgresTarget:
        return make_target(postgres_dsn)

    @pytest.fixture
    def unreachable(self) -> PostgresTarget:
        (port,) = pick_free_ports(1)
        return PostgresTarget("pg", f"host=127.0.0.1 port={port} user=postgres dbname=x",
                              REFUND_SQL)

    def effects(self, target: Target, key: str) -> int:
        assert isinstance(target, PostgresTarget)
        return refunds(target, key)


@pytest.mark.parametrize("effect_sql, sqlstate", [
    ("INSERT INTO refundz (operation_key) VALUES (%(ledger_key)s)", "42P01"),  # no such table
    ("INSERT INTO refunds (operation_key, amount) VALUES (%(ledger_key)s, -%(amount)s)",
     "23514"),  # check constraint
    ("INSERT INTO refunds (operation_key amount) VALUES (%(ledger_key)s, 1)", "42601"),
])
def test_sql_error_in_the_effect_is_failed_with_no_receipt_and_no_effect(
        postgres_dsn: str, effect_sql: str, sqlstate: str) -> None:
    target = make_target(postgres_dsn, effect_sql)
    req = request()
    with pytest.raises(PostgresRejected) as raised:
        target.apply(req, timeout_s=5)
    assert (raised.value.phase, raised.value.sqlstate) == (Phase.TRANSACTION, sqlstate)
    assert isinstance(raised.value.__cause__, psycopg.Error)
    assert target.classify(raised.value) is OutcomeStatus.FAILED
    assert "100" not in str(raised.value)  # the amount never reaches the message
    assert receipts(target, req.key) == 0
    assert refunds(target, req.key) == 0
    assert target.lookup(req.key, timeout_s=5) is None


@pytest.mark.parametrize("sqlstate, raised_as", [
    ("40001", PostgresNotApplied),  # a serialization failure: its text was quoted before
    ("P0001", PostgresRejected),
])
def test_the_servers_message_is_kept_only_as_its_length(
        postgres_dsn: str, sqlstate: str, raised_as: type[Exception]) -> None:
    """A trigger or function can raise any text under any SQLSTATE: a card number, say."""
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute("CREATE FUNCTION decline() RETURNS int LANGUAGE plpgsql AS $$ BEGIN "
                     "RAISE EXCEPTION 'card 4111 1111 1111 1111 declined' USING ERRCODE = "
                     f"'{sqlstate}'; END $$")
    target = make_target(postgres_dsn, "SELECT decline()")
    with pytest.raises(raised_as) as raised:
        target.apply(request(), timeout_s=5)
    message = str(raised.value)
    assert "4111" not in message and "declined" not in message
    assert message == ("the effect transaction failed, rolled back: "
                       f"{type(raised.value.__cause__).__name__} (message: "
                       f"{len(str(raised.value.__cause__))} characters withheld) "
                       f"[phase=transaction, sqlstate={sqlstate}]")


def test_statement_timeout_before_commit_is_not_applied(postgres_dsn: str) -> None:
    target = make_target(postgres_dsn, "SELECT pg_sleep(%(amount)s)")
    req = request(args={"amount": 5})
    started = time.monotonic()
    with pytest.raises(PostgresNotApplied) as raised:
        target.apply(req, timeout_s=1)
    assert time.monotonic() - started < 4
    assert (raised.value.phase, raised.value.sqlstate) == (Phase.TRANSACTION, "57014")
    assert target.classify(raised.value) is OutcomeStatus.NOT_APPLIED
    assert receipts(target, req.key) == 0


def test_constraint_refused_at_commit_is_failed_and_rolled_back(postgres_dsn: str) -> None:
    target = make_target(postgres_dsn, "INSERT INTO payouts VALUES (%(to)s)")
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE payouts (account text UNIQUE DEFERRABLE INITIALLY DEFERRED)")
        conn.execute("INSERT INTO payouts VALUES ('cust-1')")
    req = request()  # to: cust-1, which the deferred unique constraint refuses at COMMIT
    with pytest.raises(PostgresRejected) as raised:
        target.apply(req, timeout_s=5)
    assert (raised.value.phase, raised.value.sqlstate) == (Phase.COMMIT, "23505")
    assert target.classify(raised.value) is OutcomeStatus.FAILED
    assert receipts(target, req.key) == 0


def test_lookup_from_another_instance_finds_the_committed_effect(postgres_dsn: str) -> None:
    req = request()
    receipt = make_target(postgres_dsn).apply(req, timeout_s=5)
    fresh = PostgresTarget("pg", postgres_dsn, REFUND_SQL)
    assert receipt.startswith("pg-")
    assert fresh.lookup(req.key, timeout_s=5) == receipt
    assert fresh.lookup(req.key + "-other", timeout_s=5) is None


def test_concurrent_applies_of_one_key_make_one_effect(postgres_dsn: str) -> None:
    target = make_target(postgres_dsn)
    req = request()
    attempts = [request(req.key, req.args, attempt=n) for n in range(1, 9)]
    with ThreadPoolExecutor(len(attempts)) as pool:
        receipt_ids = set(pool.map(lambda r: target.apply(r, timeout_s=10), attempts))
    assert len(receipt_ids) == 1
    assert refunds(target, req.key) == 1


@pytest.fixture
def own_postgres() -> Iterator[PostgresServer]:
    """A server of its own, for tests that crash it."""
    server = PostgresServer()
    try:
        yield server.start()
    finally:
        server.remove()


def test_server_killed_between_applies(own_postgres: PostgresServer) -> None:
    target = make_target(own_postgres.dsn)
    first = request()
    receipt = target.apply(first, timeout_s=5)
    own_postgres.kill()

    second = request()
    with pytest.raises(PostgresNotApplied) as raised:
        target.apply(second, timeout_s=2)
    assert raised.value.phase is Phase.CONNECT
    assert target.classify(raised.value) is OutcomeStatus.NOT_APPLIED
    with pytest.raises(LookupUnavailable):
        target.lookup(first.key, timeout_s=2)

    own_postgres.restart()
    assert target.lookup(first.key, timeout_s=5) == receipt
    assert target.lookup(second.key, timeout_s=5) is None
    assert refunds(target, first.key) == 1
    assert target.apply(first, timeout_s=5) == receipt  # still fenced after the crash


def test_server_killed_during_commit_is_unknown_and_lookup_settles_it(
        own_postgres: PostgresServer) -> None:
    """A deferred trigger stalls COMMIT; the server is SIGKILLed while COMMIT waits."""
    target = make_target(own_postgres.dsn)
    with psycopg.connect(own_postgres.dsn, autocommit=True) as conn:
        conn.execute("CREATE FUNCTION stall() RETURNS trigger LANGUAGE plpgsql AS"
                     " $$ BEGIN PERFORM pg_sleep(30); RETURN NULL; END $$")
        conn.execute("CREATE CONSTRAINT TRIGGER stall_commit AFTER INSERT ON refunds"
                     " DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION stall()")
    req = request()
    killer = threading.Thread(target=_kill_when_committing, args=(own_postgres,))
    killer.start()
    try:
        with pytest.raises(PostgresOutcomeUnknown) as raised:
            target.apply(req, timeout_s=20)
    finally:
        killer.join(30)
    assert raised.value.phase is Phase.COMMIT
    assert target.classify(raised.value) is OutcomeStatus.UNKNOWN

    own_postgres.restart()
    assert target.lookup(req.key, timeout_s=5) is None  # the crash came before the commit
    assert refunds(target, req.key) == 0


def _kill_when_committing(server: PostgresServer) -> None:
    deadline = time.monotonic() + 20
    with psycopg.connect(server.dsn, autocommit=True) as watcher:
        while time.monotonic() < deadline:
            row = watcher.execute("SELECT count(*) FROM pg_stat_activity"
                                  " WHERE query = 'COMMIT' AND state = 'active'").fetchone()
            if row and row[0]:
                break
            time.sleep(0.02)
    server.kill()


def test_connectors_starting_together_create_the_receipts_table_once(postgres_dsn) -> None:
    """Found by the chaos soak: two concurrent CREATE TABLE IF NOT EXISTS of one name can
    both miss it, and the second fails on pg_type's unique index (the connector exited)."""
    import threading

    errors: list[BaseException] = []
    start = threading.Barrier(8)

    def create() -> None:
        start.wait()
        try:
            PostgresTarget("db", postgres_dsn, "select 1").ensure_schema()
        except BaseException as exc:  # noqa: BLE001 - collected for the assertion
            errors.append(exc)

    threads = [threading.Thread(target=create) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert errors == []


def test_started_while_the_database_is_down_it_waits_then_creates_the_table(
        own_postgres: PostgresServer, caplog: pytest.LogCaptureFixture) -> None:
    """Found by the chaos soak: a connector restarted while its database was down exited
    at start-up (ensure_schema could not connect) instead of waiting as it does for Kafka."""
    own_postgres.stop()
    target = PostgresTarget("pg", own_postgres.dsn, REFUND_SQL)
    stop = threading.Event()
    with ThreadPoolExecutor(1) as pool:
        ready = pool.submit(target.wait_for_schema, stop, 0.1, 0.5, 2.0)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and len(_waits(caplog)) < 3:
            time.sleep(0.05)
        assert len(_waits(caplog)) >= 3 and not ready.done()
        own_postgres.restart()
        assert ready.result(timeout=30) is True
    with psycopg.connect(own_postgres.dsn, autocommit=True) as conn:
        assert conn.execute("SELECT to_regclass('ledger_receipts')").fetchone() == (
            "ledger_receipts",)


def test_stopped_while_waiting_for_the_database_it_returns_false(
        own_postgres: PostgresServer) -> None:
    own_postgres.stop()
    stop = threading.Event()
    with ThreadPoolExecutor(1) as pool:
        ready = pool.submit(PostgresTarget("pg", own_postgres.dsn, REFUND_SQL).wait_for_schema,
                            stop, 0.1, 0.5, 2.0)
        time.sleep(0.5)
        stop.set()
        assert ready.result(timeout=10) is False


@pytest.mark.parametrize("change,said", [
    ({"dbname": "no_such_database"}, 'database "no_such_database" does not exist'),
    ({"user": "no_such_role"}, 'role "no_such_role" does not exist'),
    ({"sslmode": "require"}, "SSL was required"),
    ({"sslmode": "bogus"}, "invalid sslmode value"),
    (None, "the DSN cannot be parsed"),
])
def test_a_connection_that_waiting_would_not_fix_is_refused_at_once(
        postgres_dsn: str, change: dict[str, str] | None, said: str) -> None:
    """Found by a hostile review: only failures that say the database cannot be reached
    now (down, starting, out of slots, the network) are waited for; a mistake in the DSN
    or a refused login stops the connector with the reason, not a wait forever."""
    from psycopg.conninfo import make_conninfo

    dsn = make_conninfo(postgres_dsn, **change) if change else "host=127.0.0.1 bogus=1"
    started = time.monotonic()
    with pytest.raises(PostgresRejected) as raised:
        PostgresTarget("pg", dsn, REFUND_SQL).wait_for_schema(threading.Event())
    assert said in str(raised.value)
    assert "bogus=1" not in str(raised.value)  # a DSN libpq cannot parse is never shown
    assert time.monotonic() - started < 10


def _waits(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.getMessage().startswith("database unreachable")]


def test_the_connector_process_waits_for_its_database_and_stops_on_sigterm(
        own_postgres: PostgresServer, tmp_path: Path) -> None:
    """The CLI, not only the method: alive and saying why while the database is down, a
    clean exit on SIGTERM (the chaos soak counts any other exit as a crash)."""
    import signal
    import subprocess
    import sys

    own_postgres.stop()
    log = tmp_path / "connector.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "ledger_stream.cli.main", "connector", "postgres",
             "--name", "db", "--dsn", own_postgres.dsn, "--effect-sql", "select 1",
             "--bootstrap", "127.0.0.1:1", "--metrics-port", "off"],
            stdout=out, stderr=subprocess.STDOUT, text=True)
    try:
        # SIGTERM once it says it waits, not after a fixed sleep: on a slow machine the
        # imports alone could outlast one, and SIGTERM would land before its handler.
        deadline = time.monotonic() + 60
        while "database unreachable at start-up, waiting" not in log.read_text():
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=15)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    output = log.read_text()
    assert proc.returncode == 0, output
    assert "database unreachable at start-up, waiting" in output

"""PostgreSQL as a Target: the effect and a receipt row keyed by the operation key commit in
one transaction.

Guarantees:

- At most one effect per operation key in this database. The receipt row's primary key is
  the fence: a second ``apply`` with the same key and the same ``args_hash`` runs nothing
  and returns the first receipt id (also while the first is still in flight: it waits for
  that transaction's row lock); with another ``args_hash`` it raises ``PostgresRejected``
  and runs nothing.
- The effect and its receipt row commit together or not at all, so ``lookup`` (a read of
  the receipt row) is exact: a receipt id, or None when no effect committed.
- The outcome follows the phase that failed, recorded on the error:
  ``prepare``/``connect``/``transaction`` (COMMIT never sent, so the server rolled back):
  ``NOT_APPLIED`` for transient causes (connection refused or lost, serialization failure,
  deadlock, statement timeout), ``FAILED`` for errors a retry repeats (syntax, constraint,
  data errors in ``effect_sql``, key reused with other arguments). ``commit``: an ERROR
  reply to COMMIT means the server rolled back (classified as above); anything else (lost
  connection, no reply, FATAL) is ``UNKNOWN``.

``effect_sql`` is one statement with psycopg named placeholders (``%(amount)s``; a literal
``%`` is written ``%%``) filled from ``request.args`` plus ``ledger_key``,
``ledger_attempt_id`` and ``ledger_receipt_id`` (arguments with those names are refused).
It must only touch this database: anything outside the transaction escapes the fence.

Timeouts: ``timeout_s`` bounds the connection attempt and, as ``statement_timeout``, each
statement (COMMIT included). A dead peer is detected by TCP keepalives and
``tcp_user_timeout``, but a server that is alive yet frozen (SIGSTOP) can hold a call past
``timeout_s``; should it commit late, the receipt row still fences a resend.

Logs carry the operation key, the args hash, the phase and the SQLSTATE, never argument
values. Error messages carry the phase, the SQLSTATE, the exception's class and the
constraint name; the server's message only as its length (``connector/redaction.py``),
since a trigger can raise any text under any SQLSTATE. Only libpq's own report of a
connection that failed or broke (no SQLSTATE, no statement involved) is quoted: it names
the host, the database or the role.
"""

from __future__ import annotations

import logging
import math
import threading
import time
import uuid
from collections.abc import Mapping
from enum import StrEnum
from typing import Any

import psycopg
from psycopg import sql

from ledger_stream.connector.redaction import withheld
from ledger_stream.connector.target import EffectRequest, LookupUnavailable, Target, TargetError
from ledger_stream.domain.events import OutcomeStatus
from ledger_stream.logs import log_fields

log = logging.getLogger("connectors.postgres")

RESERVED_PARAMS = ("ledger_key", "ledger_attempt_id", "ledger_receipt_id")

# SQLSTATE classes a retry can get past: connection (08), transaction rollback such as
# serialization failure and deadlock (40), insufficient resources (53), operator
# intervention such as statement timeout or shutdown (57), system I/O (58); plus
# lock_not_available.
_TRANSIENT_CLASSES = ("08", "40", "53", "57", "58")
_TRANSIENT_STATES = ("55P03",)
# A connection attempt that failed because the database cannot be reached *now*: down,
# starting, recovering, shutting down, out of connection slots, or the network. Waiting can
# change these; any other failure to connect (a wrong password, no such database or role,
# a malformed DSN, an SSL mismatch) is a refusal that waiting would not change. libpq
# reports connection failures without a SQLSTATE, so its messages (and the server's, in
# its default English) are matched; an unrecognised failure counts as a refusal (the
# connector exits and says why, rather than waiting forever on a mistake).
_UNREACHABLE_CLASSES = ("08", "53", "57")
_UNREACHABLE_TEXT = (
    "connection refused", "could not connect", "timeout expired", "timed out",
    "the database system is starting up", "the database system is shutting down",
    "the database system is not yet accepting connections",
    "the database system is in recovery mode", "server closed the connection unexpectedly",
    "connection reset by peer", "no route to host", "network is unreachable",
    "could not translate host name", "temporary failure in name resolution",
    "too many clients already", "remaining connection slots are reserved",
    "terminating connection due to administrator command")


class Phase(StrEnum):
    PREPARE = "prepare"  # nothing sent: configuration or arguments are wrong
    CONNECT = "connect"  # no session: nothing sent
    TRANSACTION = "transaction"  # statements sent, COMMIT not sent: rolled back
    COMMIT = "commit"  # COMMIT sent: committed or not, the reply may never come


class PostgresTargetError(TargetError):
    """A PostgreSQL call failed in ``phase``; ``sqlstate`` is the server's code, if any."""

    def __init__(self, message: str, phase: Phase, sqlstate: str | None = None) -> None:
        super().__init__(f"{message} [phase={phase}, sqlstate={sqlstate}]")
        self.reason = message
        self.phase = phase
        self.sqlstate = sqlstate


class PostgresNotApplied(PostgresTargetError):
    """Certainly not committed, and a retry may succeed (NOT_APPLIED)."""


class PostgresRejected(PostgresTargetError):
    """Certainly not committed, and a retry would fail the same way (FAILED)."""


class PostgresOutcomeUnknown(PostgresTargetError):
    """COMMIT was sent and no definite answer came back (UNKNOWN): look the key up."""


class PostgresTarget(Target):
    """Runs ``effect_sql`` (or ``effect_sql[request.action]``) once per operation key."""

    deduplicates = True

    def __init__(self, name: str, dsn: str, effect_sql: str | Mapping[str, str],
                 receipts_table: str = "ledger_receipts") -> None:
        self.name = name
        self.dsn = dsn
        self.effect_sql = effect_sql
        self.receipts_table = receipts_table
        table = sql.Identifier(*receipts_table.split("."))
        self._create_sql = sql.SQL(
            "CREATE TABLE IF NOT EXISTS {} ("
            " operation_key text PRIMARY KEY,"
            " attempt_id text NOT NULL,"
            " external_id text NOT NULL UNIQUE,"
            " args_hash text NOT NULL,"
            " applied_at timestamptz NOT NULL DEFAULT now())").format(table)
        self._reserve_sql = sql.SQL(
            "INSERT INTO {} (operation_key, attempt_id, external_id, args_hash)"
            " VALUES (%s, %s, %s, %s)"
            " ON CONFLICT (operation_key) DO NOTHING RETURNING external_id").format(table)
        self._existing_sql = sql.SQL(
            "SELECT external_id, args_hash FROM {} WHERE operation_key = %s").format(table)
        self._lookup_sql = sql.SQL(
            "SELECT external_id FROM {} WHERE operation_key = %s").format(table)

    def ensure_schema(self, timeout_s: float = 10.0) -> None:
        """Create the receipts table if it is missing; leaves an existing one as it is.

        Connectors starting together take a transaction-scoped advisory lock first: two
        concurrent ``CREATE TABLE IF NOT EXISTS`` of one name can both miss the table and
        the second then fails on the type's unique index (seen in the chaos soak: a
        connector that exited at start-up)."""
        conn = self._connect(timeout_s, autocommit=True)
        try:
            _set_statement_timeout(conn, timeout_s, local=False)
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))",
                             (f"ledger-stream schema {self.receipts_table}",))
                conn.execute(self._create_sql)
        except psycopg.Error as exc:
            raise _rolled_back(exc, "creating the receipts table failed") from exc
        finally:
            conn.close()

    def wait_for_schema(self, stop: threading.Event, first_delay_s: float = 0.5,
                        max_delay_s: float = 5.0, timeout_s: float = 10.0) -> bool:
        """``ensure_schema``, asked again while the database cannot be reached (down,
        restarting, refusing connections): a connector started while its database is down
        waits for it, as it waits for Kafka, instead of exiting. True once the table
        exists; False when ``stop`` is set first. A connection failure that waiting would
        not change (wrong password, no such database or role, a malformed DSN: anything
        but the causes in _UNREACHABLE_TEXT) or a statement refused for good (no permission
        to create the table) is raised at once as ``PostgresRejected``."""
        delay = first_delay_s
        attempt = 1
        while not stop.is_set():
            try:
                self.ensure_schema(timeout_s)
            except PostgresNotApplied as exc:
                if exc.phase is Phase.CONNECT and not _unreachable(exc.__cause__):
                    hint = (": the DSN cannot be parsed (its text is not shown: it may hold "
                            "a password)" if isinstance(exc.__cause__, psycopg.ProgrammingError)
                            else "")
                    raise PostgresRejected(f"{exc.reason}{hint}", exc.phase,
                                           exc.sqlstate) from exc
                log.warning("database unreachable at start-up, waiting", extra=log_fields(
                    target=self.name, attempt=attempt, retry_in_s=round(delay, 1),
                    phase=str(exc.phase), sqlstate=exc.sqlstate, error=str(exc)))
                if stop.wait(delay):
                    return False
                delay = min(max_delay_s, delay * 2)
                attempt += 1
                continue
            if attempt > 1:
                log.info("database reachable, receipts table ready",
                         extra=log_fields(target=self.name, attempts=attempt))
            return True
        return False

    def apply(self, request: EffectRequest, timeout_s: float) -> str:
        """Reserve the key, run the effect and commit, in one transaction; see the module
        docstring for what each failure means."""
        try:
            receipt_id, committed_now = self._apply(request, timeout_s)
        except PostgresTargetError as exc:
            log.warning("effect outcome unknown" if isinstance(exc, PostgresOutcomeUnknown)
                        else "effect not committed", extra=log_fields(
                            target=self.name, operation_key=request.key,
                            args_hash=request.args_hash, attempt_id=request.attempt_id,
                            phase=str(exc.phase), sqlstate=exc.sqlstate,
                            error=type(exc).__name__))
            raise
        log.info("effect committed" if committed_now else "effect already committed",
                 extra=log_fields(target=self.name, operation_key=request.key,
                                  args_hash=request.args_hash, attempt_id=request.attempt_id,
                                  receipt_id=receipt_id))
        return receipt_id

    def classify(self, error: Exception) -> OutcomeStatus:
        if isinstance(error, PostgresNotApplied):
            return OutcomeStatus.NOT_APPLIED
        if isinstance(error, PostgresRejected):
            return OutcomeStatus.FAILED
        return OutcomeStatus.UNKNOWN

    def lookup(self, key: str, timeout_s: float) -> str | None:
        """The receipt id committed for ``key``, None if none committed. Raises
        LookupUnavailable when the database cannot be asked."""
        try:
            with psycopg.connect(self.dsn, autocommit=True,
                                 **_connect_params(timeout_s)) as conn:
                _set_statement_timeout(conn, timeout_s, local=False)
                row = conn.execute(self._lookup_sql, (key,)).fetchone()
        except psycopg.Error as exc:
            raise LookupUnavailable(
                f"{self.name}: cannot read the receipt of {key}: {describe(exc)}") from exc
        return None if row is None else str(row[0])

    def _statement_for(self, action: str) -> str:
        if isinstance(self.effect_sql, str):
            return self.effect_sql
        try:
            return self.effect_sql[action]
        except KeyError:
            raise PostgresRejected(f"{self.name} has no effect_sql for action {action!r}",
                                   Phase.PREPARE) from None

    def _apply(self, request: EffectRequest, timeout_s: float) -> tuple[str, bool]:
        """(receipt id, whether this call committed it), or a PostgresTargetError."""
        statement = self._statement_for(request.action)
        external_id = f"pg-{uuid.uuid4().hex}"
        params = _effect_params(request, external_id)
        deadline = time.monotonic() + timeout_s
        conn = self._connect(timeout_s, autocommit=False)
        try:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise PostgresNotApplied("the deadline passed while connecting", Phase.CONNECT)
            try:
                _set_statement_timeout(conn, remaining, local=True)
                existing = self._reserve(conn, request, external_id)
                if existing is not None:
                    return existing, False
                conn.execute(statement, params)
            except PostgresTargetError:
                raise
            except Exception as exc:  # COMMIT not sent: whatever it was, nothing committed
                raise _rolled_back(exc, "the effect transaction failed") from exc
            try:
                conn.commit()
            except Exception as exc:
                raise _commit_failed(exc) from exc
        finally:
            conn.close()  # without a COMMIT the server rolls back
        return external_id, True

    def _connect(self, timeout_s: float, autocommit: bool) -> psycopg.Connection[Any]:
        try:
            return psycopg.connect(self.dsn, autocommit=autocommit,
                                   **_connect_params(timeout_s))
        except psycopg.Error as exc:
            raise PostgresNotApplied(f"{self.name}: cannot connect: {describe(exc)}",
                                     Phase.CONNECT, exc.sqlstate) from exc

    def _reserve(self, conn: psycopg.Connection[Any], request: EffectRequest,
                 external_id: str) -> str | None:
        """Insert the receipt row; None when it is ours, else the first effect's receipt id
        (or PostgresRejected when that effect had other arguments)."""
        inserted = conn.execute(self._reserve_sql, (
            request.key, request.attempt_id, external_id, request.args_hash)).fetchone()
        if inserted is not None:
            return None
        row = conn.execute(self._existing_sql, (request.key,)).fetchone()
        if row is None:  # the conflicting row was deleted meanwhile: try again later
            raise PostgresNotApplied("the receipt row vanished", Phase.TRANSACTION)
        receipt_id, first_hash = str(row[0]), str(row[1])
        if first_hash != request.args_hash:
            raise PostgresRejected(
                f"operation key reused with other arguments (first args_hash {first_hash})",
                Phase.TRANSACTION)
        return receipt_id


def _connect_params(timeout_s: float) -> dict[str, Any]:
    """libpq parameters that bound the connection attempt and detect a dead peer."""
    return {
        "connect_timeout": max(2, math.ceil(timeout_s)),  # libpq's minimum is 2 seconds
        "tcp_user_timeout": max(1000, int(timeout_s * 1000)),
        "keepalives": 1,
        "keepalives_idle": max(1, int(timeout_s / 2)),
        "keepalives_interval": 1,
        "keepalives_count": 3,
    }


def _set_statement_timeout(conn: psycopg.Connection[Any], timeout_s: float,
                           local: bool) -> None:
    conn.execute("SELECT set_config('statement_timeout', %s, %s)",
                 (f"{max(1, int(timeout_s * 1000))}ms", local))


def _effect_params(request: EffectRequest, external_id: str) -> dict[str, Any]:
    clash = [name for name in RESERVED_PARAMS if name in request.args]
    if clash:
        raise PostgresRejected(f"arguments use reserved names {clash}", Phase.PREPARE)
    return {**request.args, "ledger_key": request.key,
            "ledger_attempt_id": request.attempt_id, "ledger_receipt_id": external_id}


def _is_transient(exc: Exception) -> bool:
    if not isinstance(exc, psycopg.Error):
        return False  # a bug or a value psycopg cannot adapt: a retry repeats it
    state = exc.sqlstate
    if state is None:  # raised by the client: connection lost, or a query it refused
        return isinstance(exc, psycopg.OperationalError)
    return state[:2] in _TRANSIENT_CLASSES or state in _TRANSIENT_STATES


def _rolled_back(exc: Exception, what: str,
                 phase: Phase = Phase.TRANSACTION) -> PostgresTargetError:
    """The error for a failure the server rolled back: transient or permanent by SQLSTATE."""
    sqlstate = exc.sqlstate if isinstance(exc, psycopg.Error) else None
    kind = PostgresNotApplied if _is_transient(exc) else PostgresRejected
    return kind(f"{what}, rolled back: {describe(exc)}", phase, sqlstate)


def _unreachable(exc: BaseException | None) -> bool:
    """True when a failed connection attempt says the database cannot be reached now (see
    _UNREACHABLE_TEXT); False for a refusal that waiting would not change."""
    if not isinstance(exc, psycopg.OperationalError):
        return False  # ProgrammingError: a malformed DSN; anything else: not a connection
    if (exc.sqlstate or "")[:2] in _UNREACHABLE_CLASSES:
        return True
    text = str(exc).lower()
    return any(phrase in text for phrase in _UNREACHABLE_TEXT)


def _commit_failed(exc: Exception) -> PostgresTargetError:
    """An ERROR reply to COMMIT means the server aborted the transaction (a failure after
    the commit record is written is a PANIC, never an ERROR); a lost connection, a FATAL or
    no reply at all may follow a commit."""
    if isinstance(exc, psycopg.Error) and exc.sqlstate is not None \
            and exc.diag.severity_nonlocalized == "ERROR":
        return _rolled_back(exc, "COMMIT refused", Phase.COMMIT)
    sqlstate = exc.sqlstate if isinstance(exc, psycopg.Error) else None
    return PostgresOutcomeUnknown(f"COMMIT sent, outcome unknown: {describe(exc)}",
                                  Phase.COMMIT, sqlstate)


def describe(exc: Exception) -> str:
    """The exception's class and the constraint it names; the first line of its message
    only for a failure libpq reports itself (no SQLSTATE: a connection that could not be
    made or broke), which names the host, database or role and cannot echo a statement.
    The server's own message (any error with a SQLSTATE) is withheld: a data or constraint
    error quotes row values, and a trigger's RAISE can say anything under any SQLSTATE, a
    serialization failure's included."""
    name = type(exc).__name__
    if isinstance(exc, psycopg.OperationalError) and exc.sqlstate is None:
        first_line = next(iter(str(exc).strip().splitlines()), "")
        return f"{name}: {first_line}"
    constraint = exc.diag.constraint_name if isinstance(exc, psycopg.Error) else None
    return (name + (f" on constraint {constraint}" if constraint else "")
            + f" ({withheld('message', str(exc))})")

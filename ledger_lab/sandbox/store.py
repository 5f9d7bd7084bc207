"""The sandbox's ground truth: one SQLite file (WAL) with the effects and every request seen.

Guarantees:

- At most one effect per idempotency key, whatever the concurrency: the key is the
  ``effects`` primary key and :meth:`PaymentStore.create` inserts with ``INSERT OR IGNORE``
  and reads the row back inside one transaction.
- An effect and the ``requests`` row that created it are committed together, so after a
  crash either both exist or neither does.
- Everything committed survives SIGKILL of the process (WAL, ``synchronous=NORMAL``;
  a power cut may lose the last commits, which a test oracle never meets).

One connection, shared by the server's threads behind a lock: the sandbox is a test oracle,
not a throughput target, and one writer makes every transaction trivially serial.
"""

from __future__ import annotations

import json
import secrets
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

_SCHEMA = """
CREATE TABLE IF NOT EXISTS effects (
    idempotency_key TEXT PRIMARY KEY,
    payment_id TEXT UNIQUE NOT NULL,
    body_hash TEXT NOT NULL,
    body TEXT NOT NULL,
    attempt_id TEXT,
    created_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS requests (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    idempotency_key TEXT NOT NULL,
    attempt_id TEXT,
    body_hash TEXT NOT NULL,
    result TEXT NOT NULL,
    at REAL NOT NULL
);
"""

Outcome = Literal["created", "replayed", "conflict"]


@dataclass(frozen=True, slots=True)
class Payment:
    """One committed effect."""

    idempotency_key: str
    payment_id: str
    body_hash: str
    attempt_id: str | None
    created_at: float

    def to_response(self) -> dict[str, Any]:
        """What POST and GET answer for this payment (the same JSON every time)."""
        return {"id": self.payment_id, "idempotency_key": self.idempotency_key,
                "status": "succeeded"}

    def to_ledger(self) -> dict[str, Any]:
        return {"idempotency_key": self.idempotency_key, "id": self.payment_id,
                "body_hash": self.body_hash, "attempt_id": self.attempt_id,
                "created_at": self.created_at}


def _body(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def outcome_for(payment: Payment, body_hash: str) -> Outcome:
    """``replayed`` when the stored effect has this body, ``conflict`` otherwise."""
    return "replayed" if payment.body_hash == body_hash else "conflict"


class PaymentStore:
    """The effects and request log in the SQLite file at ``path`` (created if absent)."""

    def __init__(self, path: str | Path) -> None:
        self._lock = threading.Lock()
        # isolation_level=None: we issue BEGIN IMMEDIATE / COMMIT ourselves.
        self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        # NORMAL: in WAL mode a commit is written to the log before the call returns (the OS
        # has it: a SIGKILL loses nothing); only the fsync waits for a checkpoint, so a
        # power cut may lose the last commits. FULL's fsync per commit was most of the
        # sandbox's system time per payment.
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("PRAGMA busy_timeout=5000")
        self._db.executescript(_SCHEMA)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def get(self, key: str) -> Payment | None:
        with self._lock:
            return self._select(key)

    def create(self, key: str, body_hash: str, body: dict[str, Any], attempt_id: str | None,
               result: str | None = None) -> tuple[Payment, Outcome]:
        """Insert the effect for ``key`` unless one exists; log the request; commit both.

        Returns the key's effect (new or existing) and what this request amounted to:
        ``created``, ``replayed`` (same body hash) or ``conflict`` (no effect applied).
        The request is logged with ``result`` when given (a fault label), else the outcome.
        """
        payment_id = f"pay_{secrets.token_hex(12)}"
        body_text = json.dumps(body, sort_keys=True, separators=(",", ":"))
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                inserted = self._db.execute(
                    "INSERT OR IGNORE INTO effects VALUES (?, ?, ?, ?, ?, ?)",
                    (key, payment_id, body_hash, body_text, attempt_id, time.time()),
                ).rowcount == 1
                payment = self._select(key)
                assert payment is not None
                outcome: Outcome = "created" if inserted else outcome_for(payment, body_hash)
                self._log(key, attempt_id, body_hash, result or outcome)
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        return payment, outcome

    def record_request(self, key: str, attempt_id: str | None, body_hash: str,
                       result: str) -> None:
        """Log a request that applied no effect (a replay, a conflict, a fault); committed."""
        with self._lock:
            self._log(key, attempt_id, body_hash, result)

    def ledger(self) -> dict[str, list[dict[str, Any]]]:
        """Every effect (by creation time) and every request (by arrival), as JSON values."""
        with self._lock:
            effects = self._db.execute(
                "SELECT idempotency_key, payment_id, body_hash, attempt_id, created_at, body"
                " FROM effects ORDER BY created_at, rowid").fetchall()
            requests = self._db.execute(
                "SELECT seq, idempotency_key, attempt_id, body_hash, result, at"
                " FROM requests ORDER BY seq").fetchall()
        return {
            "effects": [{**Payment(*row[:5]).to_ledger(), "body": _body(row[5])}
                        for row in effects],
            "requests": [
                dict(zip(("seq", "idempotency_key", "attempt_id", "body_hash", "result", "at"),
                         row, strict=True))
                for row in requests
            ],
        }

    def _select(self, key: str) -> Payment | None:
        row = self._db.execute(
            "SELECT idempotency_key, payment_id, body_hash, attempt_id, created_at"
            " FROM effects WHERE idempotency_key = ?", (key,)).fetchone()
        return Payment(*row) if row else None

    def _log(self, key: str, attempt_id: str | None, body_hash: str, result: str) -> None:
        # Outside a BEGIN this statement is its own committed transaction (autocommit).
        self._db.execute(
            "INSERT INTO requests (idempotency_key, attempt_id, body_hash, result, at)"
            " VALUES (?, ?, ?, ?, ?)", (key, attempt_id, body_hash, result, time.time()))

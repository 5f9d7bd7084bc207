"""Where watchers read a target's own record of its effects.

- **sandbox**: the payments sandbox's ledger (``GET /v1/ledger``), read whole on every poll.
- **postgres**: the table the effect writes (``--table``), read incrementally by an
  increasing id column (with integer ids, the last ``LATE_IDS`` ids again, for rows whose
  transaction committed after a higher id was read; a row later than that is missed). The
  PostgreSQL connector's ``effect_sql`` fills ``%(ledger_key)s`` and
  ``%(ledger_receipt_id)s``: rows that carry them are the ledger's effects (the receipt id
  is the external id the connector reported); a row without them was written around the
  ledger, and a row with a key but no receipt id is a second effect for that key.
- **smtp**: the recipients' mailbox (a Maildir), read whole on every poll. A mail with an
  ``X-Ledger-Key`` header came through the ledger; its external id is its ``Message-ID``
  (what the SMTP connector reports), and every further mail with the same ``Message-ID`` is
  a second effect (``<id>#2``, ``#3``... in delivery order), since a relay does not
  deduplicate. A mail without the header was sent around the ledger.

An incremental source has ``reported(effects)``: the watcher calls it once the reports of
``effects`` were acknowledged, and only then does the source move past them.
"""

from __future__ import annotations

import json
import mailbox
import urllib.request
from collections.abc import Sequence
from decimal import Decimal
from email.header import decode_header, make_header
from pathlib import Path
from typing import Any

from ledger_stream.watch.watcher import SeenEffect

POSTGRES_BATCH = 1000  # rows per poll
# Ids a poll reads again behind the last one reported (integer ids): a row whose id was
# assigned before a higher one but whose transaction committed after that one was read.
LATE_IDS = 100


def sandbox_effects(base_url: str, timeout_s: float = 10.0) -> list[SeenEffect]:
    """Every effect the sandbox at ``base_url`` committed, oldest first."""
    with urllib.request.urlopen(f"{base_url.rstrip('/')}/v1/ledger",
                                timeout=timeout_s) as response:
        ledger = json.load(response)
    return [SeenEffect(str(e["idempotency_key"]), str(e["id"]), e.get("body"))
            for e in ledger.get("effects", ())]


class PostgresEffects:
    """The rows of ``table`` after the last one reported, in id order (a batch a poll)."""

    def __init__(self, dsn: str, table: str, *, id_column: str = "id",
                 key_column: str = "ledger_key", receipt_column: str = "ledger_receipt_id",
                 timeout_s: float = 10.0, batch: int = POSTGRES_BATCH) -> None:
        from psycopg import sql

        self._dsn, self._table, self._timeout_s = dsn, table, timeout_s
        self._id, self._key, self._receipt = id_column, key_column, receipt_column
        parts = (sql.Identifier(*table.split(".")), sql.Identifier(id_column),
                 sql.Identifier(id_column), sql.Literal(batch + LATE_IDS))
        self._first = sql.SQL("SELECT * FROM {} WHERE {} IS NOT NULL ORDER BY {} LIMIT {}"
                              ).format(*parts)
        self._next = sql.SQL("SELECT * FROM {} WHERE {} > %s ORDER BY {} LIMIT {}"
                             ).format(*parts)
        self._after: Any = None  # the id of the last row reported
        self._positions: dict[str, Any] = {}  # external id -> row id, of the last read

    def __call__(self) -> list[SeenEffect]:
        import psycopg
        from psycopg.rows import dict_row

        with psycopg.connect(self._dsn, connect_timeout=max(2, int(self._timeout_s)),
                             autocommit=True, row_factory=dict_row) as conn:
            rows = conn.execute(self._first).fetchall() if self._after is None else \
                conn.execute(self._next, (self._behind(),)).fetchall()
        self._positions = {}
        found = []
        for row in rows:
            key, receipt, row_id = row.get(self._key), row.get(self._receipt), row[self._id]
            external = str(receipt) if receipt else f"{self._table}:{row_id}"
            self._positions[external] = row_id
            found.append(SeenEffect(str(key or ""), external, _plain(row)))
        return found

    def _behind(self) -> Any:
        after = self._after
        if isinstance(after, int) and not isinstance(after, bool):
            return after - LATE_IDS
        return after

    def reported(self, effects: Sequence[SeenEffect]) -> None:
        for effect in effects:
            row_id = self._positions.pop(effect.external_id, None)
            if row_id is not None and (self._after is None or row_id > self._after):
                self._after = row_id


def _plain(row: dict[str, Any]) -> dict[str, Any]:
    """A row as the key template sees it: text and whole numbers as they are, anything else
    (amounts, times) as text."""
    return {name: value if isinstance(value, str | int) and not isinstance(value, bool)
            else format(value, "f") if isinstance(value, Decimal) else str(value)
            for name, value in row.items()}


def maildir_effects(path: Path) -> list[SeenEffect]:
    """Every mail in the Maildir at ``path``, in delivery order (Maildir names start with
    the delivery time)."""
    box = mailbox.Maildir(path, create=False)
    found: list[SeenEffect] = []
    seen: dict[str, int] = {}
    for name in sorted(box.keys()):
        mail = box.get_message(name)
        key = _header(mail, "X-Ledger-Key")
        message_id = _header(mail, "Message-ID")
        body = {"to": _header(mail, "To"), "subject": _header(mail, "Subject"),
                "from": _header(mail, "From"), "message_id": message_id}
        if key and message_id:
            seen[message_id] = seen.get(message_id, 0) + 1
            n = seen[message_id]
            found.append(SeenEffect(key, message_id if n == 1 else f"{message_id}#{n}", body))
        else:
            found.append(SeenEffect("", f"maildir:{name}", body))
    return found


def _header(mail: mailbox.MaildirMessage, name: str) -> str:
    value = mail.get(name)
    if value is None:
        return ""
    try:
        return str(make_header(decode_header(str(value)))).strip()
    except Exception:  # noqa: BLE001 - a malformed header: the raw text
        return str(value).strip()

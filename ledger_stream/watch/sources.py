"""Where watchers read a target's own record of its effects.

- **sandbox**: the payments sandbox's ledger (``GET /v1/ledger``), read whole on every poll.
- **postgres**: the table the effect writes (``--table``), read incrementally by an
  increasing id column (with integer ids, the last ``LATE_IDS`` ids again, for rows whose
  transaction committed after a higher id was read; a row later than that is missed). The
  PostgreSQL connector's ``effect_sql`` fills ``%(ledger_key)s`` and
  ``%(ledger_receipt_id)s``: rows that carry them are the ledger's effects (the receipt id
  is the external id the connector reported); a row without them was written around the
  ledger, and a row with a key but no receipt id is a second effect for that key.
- **smtp**: the recipients' mailbox (a Maildir), read whole on every poll. Anyone can mail
  it, so nothing read there settles or changes a key: a mail with the ledger's headers
  (``X-Ledger-Key`` and the ``Message-ID`` the SMTP connector derives from that key) is
  news only when it is a second copy (``duplicate_effect``: a relay does not deduplicate);
  any other mail was sent around the ledger (``effect_without_intent``).

An incremental source has ``reported(effects)``: the watcher calls it once the reports of
``effects`` were acknowledged, and only then does the source move past them.
"""

from __future__ import annotations

import contextlib
import glob
import json
import mailbox
import urllib.error
import urllib.request
from collections.abc import Iterable, Sequence
from decimal import Decimal
from email.header import decode_header, make_header
from pathlib import Path
from typing import Any

from ledger_stream.connector.redaction import basic_auth
from ledger_stream.watch.watcher import SeenEffect

POSTGRES_BATCH = 1000  # rows per poll
# Ids a poll reads again behind the last one reported (integer ids): a row whose id was
# assigned before a higher one but whose transaction committed after that one was read.
LATE_IDS = 100


class SandboxRedirected(Exception):
    """The sandbox answered a poll with a redirect, which is not followed."""


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """A 3xx is an answer, not a new address: urllib would send the basic-auth header on
    to whatever host the redirect names (as the HTTP connector, the watch follows none)."""

    def redirect_request(self, *_args: Any, **_kwargs: Any) -> None:
        return None


_OPENER = urllib.request.build_opener(_NoRedirects)


def sandbox_effects(base_url: str, timeout_s: float = 10.0) -> list[SeenEffect]:
    """Every effect the sandbox at ``base_url`` committed, oldest first; credentials in
    ``base_url`` (``http://user:password@host``) are sent as HTTP basic auth, as the HTTP
    connector sends them. A redirect is not followed: SandboxRedirected naming its status
    (the poll failed)."""
    url, auth = basic_auth(base_url)
    request = urllib.request.Request(f"{url.rstrip('/')}/v1/ledger")
    if auth:
        request.add_unredirected_header("Authorization", auth)
    try:
        with _OPENER.open(request, timeout=timeout_s) as response:
            ledger = json.load(response)
    except urllib.error.HTTPError as exc:
        exc.close()
        if 300 <= exc.code < 400:
            raise SandboxRedirected(f"the sandbox answered HTTP {exc.code}, a redirect: "
                                    "not followed (point --base-url at the sandbox "
                                    "itself)") from None
        raise
    return [SeenEffect(str(e["idempotency_key"]), str(e["id"]), e.get("body"))
            for e in ledger.get("effects", ())]


class PostgresEffects:
    """The rows of ``table`` after the last one read, in id order (a batch a poll).

    The source owns the cursor: once a poll's reports were acknowledged (``reported``) it
    moves past every row that poll read. A row whose receipt id an earlier row already
    carried is a second effect: its external id is ``<receipt id>#<row id>``."""

    def __init__(self, dsn: str, table: str, *, id_column: str = "id",
                 key_column: str = "ledger_key", receipt_column: str = "ledger_receipt_id",
                 timeout_s: float = 10.0, batch: int = POSTGRES_BATCH) -> None:
        from psycopg import sql

        self._dsn, self._table, self._timeout_s = dsn, table, timeout_s
        self._id, self._key, self._receipt = id_column, key_column, receipt_column
        target = sql.Identifier(*table.split("."))
        parts = (target, sql.Identifier(id_column), sql.Identifier(id_column),
                 sql.Literal(batch + LATE_IDS))
        self._first = sql.SQL("SELECT * FROM {} WHERE {} IS NOT NULL ORDER BY {} LIMIT {}"
                              ).format(*parts)
        self._next = sql.SQL("SELECT * FROM {} WHERE {} > %s ORDER BY {} LIMIT {}"
                             ).format(*parts)
        self._columns = sql.SQL("SELECT * FROM {} LIMIT 0").format(target)
        self._after: int | None = None  # the id of the last row reported
        self._read_upto: int | None = None  # the highest id of the last read
        self._first_row: dict[str, int] = {}  # receipt id -> the row that carried it first

    def check(self) -> None:
        """ValueError when the table does not have the columns this source reads, or its id
        is not an integer (a UUID or a timestamp cannot be read incrementally here)."""
        import psycopg

        with psycopg.connect(self._dsn, connect_timeout=max(2, int(self._timeout_s)),
                             autocommit=True) as conn:
            cur = conn.execute(self._columns)
            types = {column.name: column.type_code for column in cur.description or ()}
        missing = [c for c in (self._id, self._key, self._receipt) if c not in types]
        if missing:
            raise ValueError(f"{self._table} has no column {', '.join(missing)}")
        if types[self._id] not in _INTEGER_TYPES:
            raise ValueError(f"{self._table}.{self._id} is not an integer column: rows are "
                             "read in the order of an increasing integer id")

    def __call__(self) -> list[SeenEffect]:
        import psycopg
        from psycopg.rows import dict_row

        with psycopg.connect(self._dsn, connect_timeout=max(2, int(self._timeout_s)),
                             autocommit=True, row_factory=dict_row) as conn:
            rows = conn.execute(self._first).fetchall() if self._after is None else \
                conn.execute(self._next, (self._after - LATE_IDS,)).fetchall()
        found = []
        for row in rows:
            key, receipt, row_id = row.get(self._key), row.get(self._receipt), int(row[self._id])
            external = f"{self._table}:{row_id}"
            if receipt:
                first = self._first_row.setdefault(str(receipt), row_id)
                external = str(receipt) if first == row_id else f"{receipt}#{row_id}"
            found.append(SeenEffect(str(key or ""), external, _plain(row)))
        self._read_upto = max((int(row[self._id]) for row in rows), default=self._read_upto)
        return found

    def reported(self, _effects: Sequence[SeenEffect]) -> None:
        if self._read_upto is not None and (self._after is None
                                            or self._read_upto > self._after):
            self._after = self._read_upto


_INTEGER_TYPES = frozenset({20, 21, 23})  # PostgreSQL's int8, int2, int4


def _plain(row: dict[str, Any]) -> dict[str, Any]:
    """A row as the key template sees it: text and whole numbers as they are, amounts and
    times as text, NULL as missing."""
    return {name: value if isinstance(value, str | int) and not isinstance(value, bool)
            else format(value, "f") if isinstance(value, Decimal) else str(value)
            for name, value in row.items() if value is not None}


class MaildirEffects:
    """Every mail in the Maildir at ``path``, in delivery order (file time, then name).

    A mail whose ``X-Ledger-Key`` names a key and whose ``Message-ID`` is the one the SMTP
    connector gives that key is one of the ledger's mails: the first copy seen is reported
    as ``<Message-ID>``, every other copy as ``<Message-ID>#<its Maildir name>`` with its
    ``repeat`` number (stable while this watcher runs, whatever is deleted). Any other mail
    was sent around the ledger. None of it is trusted: the mailbox takes mail from anyone."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._first: dict[str, str] = {}  # Message-ID -> the Maildir name of its first copy
        self._copies: dict[str, list[str]] = {}  # Message-ID -> its copies' names, in order

    def __call__(self) -> list[SeenEffect]:
        from connectors.smtp import message_id

        box = mailbox.Maildir(self._path, create=False)
        found: list[SeenEffect] = []
        for name in _delivery_order(self._path, box.keys()):
            try:
                mail = box.get_message(name)
            except (KeyError, OSError):  # delivered and removed between list and read
                continue
            key, mid = _header(mail, "X-Ledger-Key"), _header(mail, "Message-ID")
            body = {"to": _header(mail, "To"), "subject": _header(mail, "Subject"),
                    "from": _header(mail, "From"), "message_id": mid}
            if not key or not mid or mid != message_id(key):
                found.append(SeenEffect("", f"maildir:{name}", body, trusted=False))
                continue
            first = self._first.setdefault(mid, name)
            copies = self._copies.setdefault(mid, [])
            if name not in copies:
                copies.append(name)
            external = mid if first == name else f"{mid}#{name}"
            found.append(SeenEffect(key, external, body, trusted=False,
                                    repeat=copies.index(name) + 1))
        return found


def _delivery_order(path: Path, names: Iterable[str]) -> list[str]:
    def when(name: str) -> tuple[float, str]:
        for sub in ("new", "cur"):
            for candidate in (path / sub).glob(f"{glob.escape(name)}*"):
                with contextlib.suppress(OSError):
                    return candidate.stat().st_mtime, name
        return 0.0, name

    return sorted(names, key=when)


def _header(mail: mailbox.MaildirMessage, name: str) -> str:
    value = mail.get(name)
    if value is None:
        return ""
    try:
        return str(make_header(decode_header(str(value)))).strip()
    except Exception:  # noqa: BLE001 - a malformed header: the raw text
        return str(value).strip()

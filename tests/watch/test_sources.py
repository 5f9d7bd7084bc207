"""The watcher's PostgreSQL and SMTP sources on real servers (no broker: a recording
producer behind EventProducer's interface, tests/watch/test_watcher.py). The ledger's own
effects are made by the real connectors; effects around the ledger by plain SQL and
smtplib, as a script or a second system would."""

from __future__ import annotations

import base64
import json
import os
import smtplib
import threading
import time
import uuid
from email.message import EmailMessage
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import psycopg
import pytest

from connectors.postgres import PostgresTarget
from connectors.smtp import SmtpTarget, message_id
from ledger_stream.connector.target import EffectRequest
from ledger_stream.domain import events as ev
from ledger_stream.domain.keys import args_hash
from ledger_stream.watch import SeenEffect, Watcher
from ledger_stream.watch.sources import (
    LATE_IDS,
    POSTGRES_BATCH,
    MaildirEffects,
    PostgresEffects,
    SandboxRedirected,
    sandbox_effects,
)
from tests.smtp_harness import SmtpServerProc
from tests.watch.recorder import Recorder

pytestmark = pytest.mark.timeout(60)

TABLE = ("CREATE TABLE refunds (id bigserial PRIMARY KEY, invoice text, amount numeric, "
         "ledger_key text, ledger_receipt_id text)")
EFFECT_SQL = ("INSERT INTO refunds (invoice, amount, ledger_key, ledger_receipt_id) "
              "VALUES (%(invoice)s, %(amount)s, %(ledger_key)s, %(ledger_receipt_id)s)")


def request(key: str, args: dict) -> EffectRequest:
    return EffectRequest(key, 1, uuid.uuid4().hex, key.split("/")[1], args, args_hash(args))


def sent(recorder: Recorder) -> list[tuple[str, str, str]]:
    """(kind, key, external id or alert kind) of what the watcher reported."""
    out = []
    for role, event in recorder.sent:
        if isinstance(event, ev.ReconcileResult):
            out.append(("found", event.key, event.external_id))
        else:
            assert role == "alerts"
            out.append(("alert", event.key, event.kind.value))
    return out


def sql(dsn: str, *statements: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        for statement in statements:
            conn.execute(statement)


@pytest.mark.postgres
def test_postgres_rows_made_around_the_ledger_are_alerted(postgres_dsn):
    sql(postgres_dsn, TABLE)
    target = PostgresTarget("ledger-db", postgres_dsn, EFFECT_SQL)
    target.ensure_schema()
    receipt = target.apply(request("acme/refund/inv-1", {"invoice": "inv-1", "amount": 5}), 10)
    sql(postgres_dsn, "INSERT INTO refunds (invoice, amount) VALUES ('inv-2', 7.5)",  # around
        "INSERT INTO refunds (invoice, amount, ledger_key) "
        "VALUES ('inv-1', 5, 'acme/refund/inv-1')",  # a second effect for a key
        f"INSERT INTO refunds (invoice, amount, ledger_key, ledger_receipt_id) "
        f"VALUES ('inv-1', 5, 'acme/refund/inv-1', '{receipt}')")  # a copy of its receipt id
    source = PostgresEffects(postgres_dsn, "refunds")
    source.check()
    recorder = Recorder()
    watcher = Watcher("ledger-db", source, recorder, "acme/refund/{invoice}")
    assert watcher.poll() == 4
    assert sent(recorder) == [("found", "acme/refund/inv-1", receipt),
                              ("alert", "acme/refund/inv-2", "effect_without_intent"),
                              ("found", "acme/refund/inv-1", "refunds:3"),
                              ("found", "acme/refund/inv-1", f"{receipt}#4")]
    recorder.sent.clear()
    assert watcher.poll() == 0  # read incrementally: nothing new

    # A failed delivery: the source does not move past the rows, the next poll repeats them.
    sql(postgres_dsn, "INSERT INTO refunds (invoice, amount) VALUES ('inv-5', 1)")
    recorder.fail_next_flush = True
    with pytest.raises(Exception, match="not acknowledged"):
        watcher.poll()
    assert watcher.poll() == 1
    assert sent(recorder) == [("alert", "acme/refund/inv-5", "effect_without_intent")]


@pytest.mark.postgres
def test_postgres_a_window_of_known_rows_never_stalls_the_cursor(postgres_dsn):
    """One effect statement wrote more rows than a poll reads, all with its receipt id:
    the cursor still moves past them, and the row after them is reported."""
    sql(postgres_dsn, TABLE,
        f"INSERT INTO refunds (invoice, amount, ledger_key, ledger_receipt_id) "
        f"SELECT 'inv-1', 1, 'acme/refund/inv-1', 'pg-1' "
        f"FROM generate_series(1, {POSTGRES_BATCH + LATE_IDS + 10})")
    recorder = Recorder()
    watcher = Watcher("ledger-db", PostgresEffects(postgres_dsn, "refunds"), recorder,
                      "acme/refund/{invoice}")
    while watcher.poll():
        pass
    sql(postgres_dsn, "INSERT INTO refunds (invoice, amount) VALUES ('inv-late', 1)")
    watcher.poll()
    assert ("alert", "acme/refund/inv-late", "effect_without_intent") in sent(recorder)


@pytest.mark.postgres
def test_postgres_a_row_committed_after_a_higher_id_was_read_is_not_missed(postgres_dsn):
    sql(postgres_dsn, TABLE)
    recorder = Recorder()
    watcher = Watcher("ledger-db", PostgresEffects(postgres_dsn, "refunds"), recorder,
                      "acme/refund/{invoice}")
    slow = psycopg.connect(postgres_dsn)  # its id is taken first, it commits last
    slow.execute("INSERT INTO refunds (invoice, amount) VALUES ('inv-slow', 1)")
    sql(postgres_dsn, "INSERT INTO refunds (invoice, amount) VALUES ('inv-fast', 1)")
    assert watcher.poll() == 1
    slow.commit()
    slow.close()
    assert watcher.poll() == 1
    assert [key for _, key, _ in sent(recorder)] == ["acme/refund/inv-fast",
                                                     "acme/refund/inv-slow"]


@pytest.mark.postgres
def test_postgres_a_table_the_source_cannot_read_incrementally_is_refused(postgres_dsn):
    sql(postgres_dsn, "CREATE TABLE by_uuid (id uuid PRIMARY KEY, ledger_key text, "
        "ledger_receipt_id text)", "CREATE TABLE no_key (id bigserial, amount numeric)")
    with pytest.raises(ValueError, match="not an integer"):
        PostgresEffects(postgres_dsn, "by_uuid").check()
    with pytest.raises(ValueError, match="no column ledger_key, ledger_receipt_id"):
        PostgresEffects(postgres_dsn, "no_key").check()


def mail(server: SmtpServerProc, **headers: str) -> None:
    message = EmailMessage()
    message["From"], message["To"] = "someone@example.test", "carol@example.test"
    for name, value in headers.items():
        message[name.replace("_", "-")] = value
    message.set_content("a mail")
    with smtplib.SMTP(server.host, server.port, timeout=10) as client:
        client.send_message(message)


def settle(maildir: Path, count: int) -> None:
    deadline = time.monotonic() + 10
    while len(os.listdir(maildir / "new")) + len(os.listdir(maildir / "cur")) < count:
        assert time.monotonic() < deadline, "the mails never arrived"
        time.sleep(0.05)


def test_smtp_the_mailbox_raises_alerts_and_never_settles_a_key(tmp_path):
    key = "acme/notify/n-1"
    with SmtpServerProc(tmp_path / "smtp") as server:
        target = SmtpTarget(server.host, server.port, "ledger@example.test")
        sent_mail = request(key, {"to": "bob@example.test", "subject": "Refund"})
        first = target.apply(sent_mail, 10)
        settle(server.maildir, 1)
        time.sleep(0.02)  # delivery order is the file time
        target.apply(request(key, sent_mail.args), 10)  # a resend: a second mail
        mail(server, Subject="n-2")  # around the ledger
        # Forged: the ledger's headers on someone else's mail, without the key's Message-ID.
        mail(server, Subject="n-3", X_Ledger_Key=key, Message_ID="<forged@evil.test>")
        settle(server.maildir, 4)
    assert first == message_id(key)
    recorder = Recorder()
    source = MaildirEffects(server.maildir)
    watcher = Watcher("mail", source, recorder, "acme/notify/{subject}", deduplicates=False)
    assert watcher.poll() == 4
    # The first copy is the ledger's own mail: nothing to say, and nothing is settled.
    assert sorted(sent(recorder)) == sorted([
        ("alert", key, "duplicate_effect"),
        ("alert", "acme/notify/n-2", "effect_without_intent"),
        ("alert", "acme/notify/n-3", "effect_without_intent")])
    assert not [e for _, e in recorder.sent if isinstance(e, ev.ReconcileResult)]
    assert watcher.poll() == 0

    # The mailbox is emptied; a third copy arrives: still a repeat, never the "first" again.
    for sub in ("new", "cur"):
        for name in os.listdir(server.maildir / sub):
            os.remove(server.maildir / sub / name)
    recorder.sent.clear()
    with SmtpServerProc(tmp_path / "smtp") as server:
        SmtpTarget(server.host, server.port, "ledger@example.test").apply(
            request(key, sent_mail.args), 10)
        settle(server.maildir, 1)
    assert watcher.poll() == 1
    assert sent(recorder) == [("alert", key, "duplicate_effect")]


def test_an_oversized_id_is_reported_by_its_hash():
    from ledger_stream.watch import SeenEffect

    recorder = Recorder()
    watcher = Watcher("db", lambda: [SeenEffect("acme/refund/inv-1", "x" * 5000)], recorder)
    assert watcher.poll() == 1
    (found,) = [e for _, e in recorder.sent]
    assert found.external_id.startswith("sha256:") and len(found.external_id) < 100


def test_sandbox_credentials_in_the_base_url_are_sent_as_basic_auth():
    # `watch sandbox --base-url http://u:p@host:port` passed the start check, then every
    # poll failed: urllib took "u:p@host" for the host name.
    seen: list[tuple[str, str | None, str | None]] = []
    ledger = json.dumps({"effects": [{"idempotency_key": "acme/refund/1", "id": "pay-1",
                                      "body": {"amount": 1}}]}).encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append((self.path, self.headers.get("Authorization"),
                         self.headers.get("Host")))
            self.send_response(200)
            self.send_header("Content-Length", str(len(ledger)))
            self.end_headers()
            self.wfile.write(ledger)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    host = f"127.0.0.1:{server.server_address[1]}"
    try:
        found = sandbox_effects(f"http://watch:pa%40ss@{host}/")
    finally:
        server.shutdown()
        server.server_close()
    assert seen == [("/v1/ledger", "Basic " + base64.b64encode(b"watch:pa@ss").decode(), host)]
    assert [(e.idempotency_key, e.external_id) for e in found] == [("acme/refund/1", "pay-1")]


def _serve(handler: type[BaseHTTPRequestHandler]) -> ThreadingHTTPServer:
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    return server


@pytest.mark.parametrize("status", [301, 302, 307, 308])
def test_sandbox_a_redirect_is_a_failed_poll_and_the_password_goes_nowhere(status, caplog):
    # urllib followed redirects and copied the Authorization header to the host a
    # redirect named, another host too (found by a review: t3.py).
    elsewhere: list[tuple[str, str | None]] = []

    class Other(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            elsewhere.append((self.path, self.headers.get("Authorization")))
            body = json.dumps({"effects": []}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    other = _serve(Other)
    asked: list[str | None] = []

    class Redirecting(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            asked.append(self.headers.get("Authorization"))
            self.send_response(status)  # "localhost" is another origin than 127.0.0.1
            self.send_header("Location", f"http://localhost:{other.server_address[1]}/x")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    sandbox = _serve(Redirecting)
    url = f"http://watch:s3cret@127.0.0.1:{sandbox.server_address[1]}"
    stop = threading.Event()

    def poll_once() -> list[SeenEffect]:
        stop.set()
        return sandbox_effects(url)

    recorder = Recorder()
    try:
        with pytest.raises(SandboxRedirected, match=f"HTTP {status}"):
            sandbox_effects(url)
        with caplog.at_level("WARNING", logger="ledger_stream.watch.watcher"):
            Watcher("pay", poll_once, recorder).run(stop, 0.01)
    finally:
        for server in (sandbox, other):
            server.shutdown()
            server.server_close()
    assert elsewhere == [] and recorder.sent == []  # the other host's own log: no request
    assert asked == ["Basic " + base64.b64encode(b"watch:s3cret").decode()] * 2
    (logged,) = [r for r in caplog.records if r.getMessage() == "poll failed; retrying"]
    said = logged.fields["error"]  # type: ignore[attr-defined]
    assert f"HTTP {status}, a redirect" in said and "s3cret" not in said

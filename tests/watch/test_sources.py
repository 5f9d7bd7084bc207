"""The watcher's PostgreSQL and SMTP sources on real servers (no broker: a recording
producer behind EventProducer's interface, tests/watch/test_watcher.py). The ledger's own
effects are made by the real connectors; effects around the ledger by plain SQL and
smtplib, as a script or a second system would."""

from __future__ import annotations

import smtplib
import time
import uuid
from email.message import EmailMessage

import psycopg
import pytest

from connectors.postgres import PostgresTarget
from connectors.smtp import SmtpTarget
from ledger_stream.connector.target import EffectRequest
from ledger_stream.domain import events as ev
from ledger_stream.domain.keys import args_hash
from ledger_stream.watch import Watcher
from ledger_stream.watch.sources import LATE_IDS, PostgresEffects, maildir_effects
from tests.smtp_harness import SmtpServerProc
from tests.watch.test_watcher import Recorder

pytestmark = pytest.mark.timeout(60)

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


@pytest.mark.postgres
def test_postgres_rows_made_around_the_ledger_are_alerted(postgres_dsn):
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE refunds (id bigserial PRIMARY KEY, invoice text, "
                     "amount numeric, ledger_key text, ledger_receipt_id text)")
    target = PostgresTarget("ledger-db", postgres_dsn, EFFECT_SQL)
    target.ensure_schema()
    receipt = target.apply(request("acme/refund/inv-1", {"invoice": "inv-1", "amount": 5}), 10)
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute("INSERT INTO refunds (invoice, amount) VALUES ('inv-2', 7.5)")  # around
        conn.execute("INSERT INTO refunds (invoice, amount, ledger_key) "
                     "VALUES ('inv-1', 5, 'acme/refund/inv-1')")  # a second effect for a key
    source = PostgresEffects(postgres_dsn, "refunds")
    recorder = Recorder()
    watcher = Watcher("ledger-db", source, recorder, "acme/refund/{invoice}")
    assert watcher.poll() == 3
    assert sent(recorder) == [("found", "acme/refund/inv-1", receipt),
                              ("alert", "acme/refund/inv-2", "effect_without_intent"),
                              ("found", "acme/refund/inv-1", "refunds:3")]
    recorder.sent.clear()
    assert watcher.poll() == 0  # read incrementally: nothing new

    # A failed delivery: the source does not move past the rows, the next poll repeats them.
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute("INSERT INTO refunds (invoice, amount) VALUES ('inv-4', 1)")
    recorder.fail_next_flush = True
    with pytest.raises(Exception, match="not acknowledged"):
        watcher.poll()
    assert watcher.poll() == 1
    assert sent(recorder) == [("alert", "acme/refund/inv-4", "effect_without_intent")]


@pytest.mark.postgres
def test_postgres_a_row_committed_after_a_higher_id_was_read_is_not_missed(postgres_dsn):
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE refunds (id bigserial PRIMARY KEY, invoice text, "
                     "amount numeric, ledger_key text, ledger_receipt_id text)")
    source = PostgresEffects(postgres_dsn, "refunds")
    recorder = Recorder()
    watcher = Watcher("ledger-db", source, recorder, "acme/refund/{invoice}")
    slow = psycopg.connect(postgres_dsn)  # its id is taken first, it commits last
    slow.execute("INSERT INTO refunds (invoice, amount) VALUES ('inv-slow', 1)")
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute("INSERT INTO refunds (invoice, amount) VALUES ('inv-fast', 1)")
    assert watcher.poll() == 1
    slow.commit()
    slow.close()
    assert watcher.poll() == 1
    assert [key for _, key, _ in sent(recorder)] == ["acme/refund/inv-fast",
                                                     "acme/refund/inv-slow"]
    assert LATE_IDS >= 1


def test_smtp_mails_around_the_ledger_and_second_mails_are_reported(tmp_path):
    with SmtpServerProc(tmp_path / "smtp") as server:
        target = SmtpTarget(server.host, server.port, "ledger@example.test")
        mail = request("acme/notify/n-1", {"to": "bob@example.test", "subject": "Refund"})
        first = target.apply(mail, 10)
        again = target.apply(request("acme/notify/n-1", mail.args), 10)  # a resend: 2 mails
        rogue = EmailMessage()
        rogue["From"], rogue["To"], rogue["Subject"] = ("script@example.test",
                                                        "carol@example.test", "n-2")
        rogue.set_content("sent around the ledger")
        with smtplib.SMTP(server.host, server.port, timeout=10) as client:
            client.send_message(rogue)
        deadline = time.monotonic() + 10
        while len(maildir_effects(server.maildir)) < 3 and time.monotonic() < deadline:
            time.sleep(0.1)
    assert first == again  # one Message-ID per key: the relay cannot tell them apart
    recorder = Recorder()
    watcher = Watcher("mail", lambda: maildir_effects(server.maildir), recorder,
                      "acme/notify/{subject}", deduplicates=False)
    assert watcher.poll() == 3
    assert sent(recorder) == [("found", "acme/notify/n-1", first),
                              ("found", "acme/notify/n-1", f"{first}#2"),
                              ("alert", "acme/notify/n-2", "effect_without_intent")]
    assert all(not e.target_deduplicates for _, e in recorder.sent
               if isinstance(e, ev.ReconcileResult))
    assert watcher.poll() == 0

"""The PostgreSQL and SMTP connectors as real processes with the processor, on the broker.

Effects are counted in the targets' own ledgers: rows of the effect table, and the SMTP
server's log of received mail.
"""

from __future__ import annotations

import uuid

import psycopg
import pytest

from ledger_lab.harness.processes import Proc
from ledger_lab.harness.stack import TERMINAL, Stack
from ledger_stream.domain import events as ev

pytestmark = pytest.mark.timeout(180)

EFFECT_SQL = "insert into refunds(operation_key, amount) values (%(ledger_key)s, %(amount)s)"


@pytest.fixture
def refunds_dsn(postgres_dsn: str) -> str:
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute("create table refunds(id serial primary key, operation_key text not null,"
                     " amount int not null)")
    return postgres_dsn


def rows(dsn: str, key: str) -> int:
    with psycopg.connect(dsn) as conn:
        return conn.execute("select count(*) from refunds where operation_key = %s",
                            (key,)).fetchone()[0]


def pg_connector(stack: Stack, dsn: str, failpoint: str | None = None) -> Proc:
    return stack.connector("postgres", "--name", "ledger-db", "--dsn", dsn,
                           "--effect-sql", EFFECT_SQL, failpoint=failpoint)


@pytest.mark.parametrize("failpoint", ["before_call", "after_call", "before_outcome"])
def test_postgres_connector_killed_then_restarted_applies_once(stack, refunds_dsn, failpoint):
    key = f"acme/refund/{uuid.uuid4().hex[:8]}"
    doomed = pg_connector(stack, refunds_dsn, failpoint)
    stack.submit(key, {"amount": 125}, "ledger-db")
    assert doomed.popen.wait(60) == -9, doomed.tail()
    pg_connector(stack, refunds_dsn)
    receipt = stack.await_key(key, TERMINAL)
    assert receipt.key_status is ev.ReceiptStatus.SUCCEEDED
    assert rows(refunds_dsn, key) == 1
    stack.submit(key, {"amount": 125}, "ledger-db")  # a replay: the original receipt
    assert stack.await_key(key, TERMINAL).external_id == receipt.external_id
    assert rows(refunds_dsn, key) == 1


def smtp_connector(stack: Stack, server, failpoint: str | None = None) -> Proc:
    return stack.connector("smtp", "--name", "mail", "--smtp-host", "127.0.0.1",
                           "--smtp-port", str(server.port), failpoint=failpoint)


def mails(server, key: str) -> list[dict]:
    return [m for m in server.ledger() if m["ledger_key"] == key]


MAIL = {"to": "customer@example.test", "subject": "Your refund"}


def test_smtp_sends_once_and_duplicates_get_the_original_receipt(stack, smtp_server):
    smtp_connector(stack, smtp_server)
    key = f"acme/notify/{uuid.uuid4().hex[:8]}"
    stack.submit(key, MAIL, "mail", payload={"text": "Refunded."})
    first = stack.await_key(key, TERMINAL)
    stack.submit(key, MAIL, "mail", payload={"text": "Refunded, again?"})
    assert stack.await_key(key, TERMINAL).external_id == first.external_id
    (mail,) = mails(smtp_server, key)
    assert mail["message_id"] == first.external_id


def test_smtp_unknown_outcome_waits_for_an_operator_never_resends(stack, smtp_server):
    key = f"acme/notify/{uuid.uuid4().hex[:8]}"
    doomed = smtp_connector(stack, smtp_server, failpoint="after_call")
    stack.submit(key, MAIL, "mail", payload={"text": "Refunded."})
    assert doomed.popen.wait(60) == -9, doomed.tail()
    smtp_connector(stack, smtp_server)
    receipt = stack.await_key(key, TERMINAL, timeout_s=90)
    assert receipt.key_status is ev.ReceiptStatus.NEEDS_RECONCILIATION
    (mail,) = mails(smtp_server, key)
    resolve = Proc(["reconcile", "resolve", key, "--applied", mail["message_id"],
                    "--attempt", str(receipt.attempts), "--reason", "found in the mailbox",
                    "--bootstrap", stack.bootstrap, "--topic-prefix",
                    stack.settings.topic_prefix], stack.tmp / "resolve.log")
    assert resolve.popen.wait(60) == 0, resolve.tail()
    settled = stack.await_key(key, {ev.ReceiptStatus.SUCCEEDED})
    assert settled.external_id == mail["message_id"]
    assert len(mails(smtp_server, key)) == 1

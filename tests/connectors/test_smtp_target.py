"""SmtpTarget against a real SMTP server (aiosmtpd in its own process) whose own ledger
records every mail it accepted: the Target contract, then the failure phases."""

from __future__ import annotations

from pathlib import Path

import pytest

from connectors.smtp import (
    Phase,
    SmtpNotSent,
    SmtpOutcomeUnknown,
    SmtpRefused,
    SmtpTarget,
    message_id,
)
from ledger_lab.local_kafka.ports import pick_free_ports
from ledger_stream.connector.target import Target
from ledger_stream.domain.events import OutcomeStatus
from ledger_stream.testing.targets import TargetContract, request
from tests.smtp_harness import SmtpServerProc

pytestmark = [pytest.mark.timeout(60), pytest.mark.smtp]


def smtp_target(server: SmtpServerProc, timeout: float = 10.0) -> SmtpTarget:
    return SmtpTarget(server.host, server.port, "ledger@example.test", timeout=timeout)


def mails(server: SmtpServerProc, key: str) -> list[dict]:
    return [mail for mail in server.ledger() if mail["ledger_key"] == key]


class TestSmtpTarget(TargetContract):
    queryable = False

    @pytest.fixture
    def target(self, smtp_server: SmtpServerProc) -> SmtpTarget:
        self.server = smtp_server  # pytest gives the fixture and the test one instance
        return smtp_target(smtp_server)

    @pytest.fixture
    def unreachable(self) -> SmtpTarget:
        (port,) = pick_free_ports(1)
        return SmtpTarget("127.0.0.1", port, "ledger@example.test", timeout=2)

    def effects(self, target: Target, key: str) -> int:
        return len(mails(self.server, key))


def test_mail_carries_the_key_attempt_and_a_message_id_derived_from_the_key(
        smtp_server: SmtpServerProc) -> None:
    target = smtp_target(smtp_server)
    first = request(args={"to": "cust-1@example.test", "subject": "Your refund"})
    second = request(first.key, first.args, attempt=2)
    assert target.apply(first, timeout_s=5) == message_id(first.key)
    assert target.apply(second, timeout_s=5) == message_id(first.key)

    sent = mails(smtp_server, first.key)
    assert [m["attempt_id"] for m in sent] == [first.attempt_id, second.attempt_id]
    assert {m["message_id"] for m in sent} == {message_id(first.key)}
    assert sent[0]["to"] == ["cust-1@example.test"]
    assert sent[0]["subject"] == "Your refund"


def test_reply_after_data_slower_than_the_client_is_unknown_and_the_mail_exists(
        tmp_path: Path) -> None:
    with SmtpServerProc(tmp_path, delay_after_data_s=5) as server:
        target = smtp_target(server)
        req = request()
        with pytest.raises(SmtpOutcomeUnknown) as raised:
            target.apply(req, timeout_s=1)
        assert (raised.value.phase, raised.value.step) == (Phase.CONTENT, "end of data")
        assert target.classify(raised.value) is OutcomeStatus.UNKNOWN
        assert len(mails(server, req.key)) == 1  # the relay took the mail all the same


def test_recipient_refused_with_550_is_failed_and_sends_nothing(
        smtp_server: SmtpServerProc) -> None:
    target = smtp_target(smtp_server)
    req = request(args={"to": "nobody@refused.test"})
    with pytest.raises(SmtpRefused) as raised:
        target.apply(req, timeout_s=5)
    assert (raised.value.phase, raised.value.step, raised.value.code) == (
        Phase.ENVELOPE, "rcpt", 550)
    assert "refused.test" not in str(raised.value)  # addresses stay out of messages
    assert target.classify(raised.value) is OutcomeStatus.FAILED
    assert smtp_server.ledger() == []


def test_recipient_deferred_with_451_is_not_applied(smtp_server: SmtpServerProc) -> None:
    target = smtp_target(smtp_server)
    with pytest.raises(SmtpNotSent) as raised:
        target.apply(request(args={"to": "later@tempfail.test"}), timeout_s=5)
    assert (raised.value.step, raised.value.code) == ("rcpt", 451)
    assert target.classify(raised.value) is OutcomeStatus.NOT_APPLIED
    assert smtp_server.ledger() == []


def test_server_killed_between_calls_is_not_applied(smtp_server: SmtpServerProc) -> None:
    target = smtp_target(smtp_server)
    target.apply(request(), timeout_s=5)
    smtp_server.kill()
    with pytest.raises(SmtpNotSent) as raised:
        target.apply(request(), timeout_s=2)
    assert raised.value.phase is Phase.CONNECT
    assert target.classify(raised.value) is OutcomeStatus.NOT_APPLIED
    assert len(smtp_server.ledger()) == 1


def test_a_request_without_a_recipient_is_failed_before_connecting() -> None:
    (port,) = pick_free_ports(1)  # nothing listens: the call must not get that far
    target = SmtpTarget("127.0.0.1", port, "ledger@example.test")
    with pytest.raises(SmtpRefused) as raised:
        target.apply(request(args={"amount": 1}), timeout_s=2)
    assert raised.value.phase is Phase.PREPARE
    assert target.classify(raised.value) is OutcomeStatus.FAILED


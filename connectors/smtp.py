"""SMTP as a Target: one mail per call, to a relay that knows no idempotency key.

Guarantees and limits:

- No deduplication: two calls send two mails. The ledger's grant is the only fence, so this
  target always waits for the grant and never gets an automatic resend after an unknown
  outcome. Every attempt of a key carries the same ``Message-ID`` (derived from the key),
  so a receiver can still drop a duplicate, plus ``X-Ledger-Key`` and ``X-Attempt-Id``.
- No lookup: ``lookup`` raises ``LookupUnavailable``, so an unknown outcome ends in
  ``needs_reconciliation`` for an operator, never in a blind resend.
- The outcome follows how far the conversation got, recorded on the error as ``phase``.
  Until the message content starts to go out (connect, greeting, EHLO, MAIL, RCPT, the
  DATA command) no mail can exist: a 4xx reply, a refused or dropped connection or a
  timeout is ``NOT_APPLIED``, a 5xx reply (sender or recipient refused) is ``FAILED``.
  From the first byte of content on, anything but the final 250 (timeout, disconnect, an
  error reply to the end of data) is ``UNKNOWN``.
- ``timeout_s`` (capped by the target's ``timeout``) bounds the whole conversation: every
  socket wait gets the time that is left, and a deadline that passes before the content is
  sent ends the call as ``NOT_APPLIED``.

Logs and error messages carry the key, the attempt id, the step, the reply code and its
enhanced status code, never addresses, subjects or bodies; a server's reply text (it can
quote the recipient) only as its length (``connector/redaction.py``).
"""

from __future__ import annotations

import email.policy
import hashlib
import logging
import re
import smtplib
import socket
import time
from collections.abc import Callable
from email.message import EmailMessage
from email.utils import formatdate
from enum import StrEnum

from ledger_stream.connector.redaction import withheld
from ledger_stream.connector.target import EffectRequest, LookupUnavailable, Target, TargetError
from ledger_stream.domain.events import OutcomeStatus
from ledger_stream.logs import log_fields

log = logging.getLogger("connectors.smtp")

# 7-bit transfer encodings and CRLF line ends: any relay takes the content as it is.
_POLICY = email.policy.SMTP.clone(cte_type="7bit")


class Phase(StrEnum):
    PREPARE = "prepare"  # building the message: nothing sent
    CONNECT = "connect"  # connecting, waiting for the greeting
    ENVELOPE = "envelope"  # EHLO, MAIL, RCPT, DATA command: no content sent yet
    CONTENT = "content"  # content sent (or being sent): the relay may have taken it


class SmtpTargetError(TargetError):
    """An SMTP call failed in ``phase`` at ``step``; ``code`` is the reply code, if any."""

    def __init__(self, message: str, phase: Phase, step: str, code: int | None = None) -> None:
        super().__init__(f"{message} [phase={phase}, step={step}, code={code}]")
        self.phase = phase
        self.step = step
        self.code = code


class SmtpNotSent(SmtpTargetError):
    """No mail can exist, and a retry may succeed (NOT_APPLIED)."""


class SmtpRefused(SmtpTargetError):
    """The relay refused for good (5xx before the content), or the request is malformed
    (FAILED)."""


class SmtpOutcomeUnknown(SmtpTargetError):
    """The content went out without a 250 coming back (UNKNOWN)."""


def message_id(key: str) -> str:
    """The Message-ID every attempt of ``key`` carries: ``<sha256(key)[:40]@ledger-stream>``."""
    return f"<{hashlib.sha256(key.encode()).hexdigest()[:40]}@ledger-stream>"


class SmtpTarget(Target):
    """Sends ``request.payload["text"]`` to ``request.args["to"]``; subject from
    ``request.args["subject"]``, else the action. Returns the Message-ID."""

    deduplicates = False
    queryable = False  # SMTP has no lookup: unknown outcomes go to an operator

    def __init__(self, host: str, port: int, from_addr: str, timeout: float = 30.0,
                 name: str = "smtp") -> None:
        self.name = name
        self.host = host
        self.port = port
        self.from_addr = from_addr
        self.timeout = timeout

    def apply(self, request: EffectRequest, timeout_s: float) -> str:
        to, content, mid = self._message(request)
        conversation = _Conversation(time.monotonic() + min(timeout_s, self.timeout))
        try:
            conversation.send(self.host, self.port, self.from_addr, to, content)
        except SmtpTargetError as exc:
            log.warning("mail not confirmed", extra=log_fields(
                target=self.name, operation_key=request.key, args_hash=request.args_hash,
                attempt_id=request.attempt_id, phase=str(exc.phase), step=exc.step,
                code=exc.code, error=type(exc).__name__))
            raise
        log.info("mail accepted", extra=log_fields(
            target=self.name, operation_key=request.key, args_hash=request.args_hash,
            attempt_id=request.attempt_id, message_id=mid))
        return mid

    def classify(self, error: Exception) -> OutcomeStatus:
        if isinstance(error, SmtpNotSent):
            return OutcomeStatus.NOT_APPLIED
        if isinstance(error, SmtpRefused):
            return OutcomeStatus.FAILED
        return OutcomeStatus.UNKNOWN

    def lookup(self, key: str, timeout_s: float) -> str | None:
        raise LookupUnavailable("SMTP has no lookup by key")

    def _message(self, request: EffectRequest) -> tuple[str, bytes, str]:
        """(recipient, dot-stuffed content ending in CRLF.CRLF, Message-ID)."""
        mid = message_id(request.key)
        try:
            to = str(request.args["to"])
            msg = EmailMessage(policy=_POLICY)
            msg["From"] = self.from_addr
            msg["To"] = to
            msg["Subject"] = str(request.args.get("subject") or request.action)
            msg["Date"] = formatdate(usegmt=True)
            msg["Message-ID"] = mid
            msg["X-Ledger-Key"] = request.key
            msg["X-Attempt-Id"] = request.attempt_id
            msg.set_content(str(request.payload.get("text", "")))
            content = msg.as_bytes()
        except (KeyError, ValueError, TypeError) as exc:
            raise SmtpRefused(f"cannot build the mail: {type(exc).__name__}",
                              Phase.PREPARE, "message") from exc
        return to, _dot_stuffed(content), mid


class _Conversation:
    """One SMTP conversation, step by step, remembering how far it got."""

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline
        self.client = smtplib.SMTP(local_hostname=socket.gethostname())
        self.phase = Phase.CONNECT
        self.step = "connect"

    def send(self, host: str, port: int, from_addr: str, to: str, content: bytes) -> None:
        client = self.client
        try:
            self._reply("connect", lambda: client.connect(host, port), (220,))
            self.phase = Phase.ENVELOPE
            code, _ = self._call("ehlo", client.ehlo)
            if code != 250:  # an old relay: plain HELO
                self._reply("helo", client.helo, (250,))
            self._reply("mail", lambda: client.mail(from_addr), (250,))
            self._reply("rcpt", lambda: client.rcpt(to), (250, 251))
            self._reply("data", lambda: _command(client, "data"), (354,))
            self._reply("end of data", lambda: _content(client, content), (250,),
                        then=Phase.CONTENT)
        except SmtpTargetError:
            client.close()
            raise
        except Exception as exc:
            client.close()
            raise self._failure(exc) from exc
        try:  # the mail is accepted; a failed goodbye changes nothing
            client.quit()
        except (smtplib.SMTPException, OSError):
            client.close()

    def _call(self, step: str, call: Callable[[], tuple[int, bytes]],
              then: Phase | None = None) -> tuple[int, bytes]:
        """Run one step in the time left; ``then`` is the phase the step itself enters
        (entered after the deadline check, so a passed deadline still counts as before)."""
        self.step = step
        self._arm()
        if then is not None:
            self.phase = then
        return call()

    def _reply(self, step: str, call: Callable[[], tuple[int, bytes]],
               ok: tuple[int, ...], then: Phase | None = None) -> None:
        code, text = self._call(step, call, then)
        if code in ok:
            return
        status = _enhanced_status(text)
        message = (f"{step} answered {code}{f' {status}' if status else ''}, "
                   f"{withheld('reply text', text)}")
        if self.phase is Phase.CONTENT:
            raise SmtpOutcomeUnknown(message, self.phase, step, code)
        if 500 <= code < 600:
            raise SmtpRefused(message, self.phase, step, code)
        raise SmtpNotSent(message, self.phase, step, code)

    def _arm(self) -> None:
        """Give the next socket wait the time left; before the content, a passed deadline
        ends the call with nothing sent."""
        left = self.deadline - time.monotonic()
        if left <= 0:  # every step that arms comes before the content
            raise SmtpNotSent("deadline passed before the content was sent",
                              self.phase, self.step)
        self.client.timeout = left  # used by connect()
        if self.client.sock is not None:
            self.client.sock.settimeout(left)

    def _failure(self, exc: Exception) -> SmtpTargetError:
        what = f"{self.step} failed: {type(exc).__name__}"
        if self.phase is Phase.CONTENT:
            return SmtpOutcomeUnknown(what, self.phase, self.step)
        if isinstance(exc, smtplib.SMTPResponseException) and 500 <= exc.smtp_code < 600:
            return SmtpRefused(what, self.phase, self.step, exc.smtp_code)
        if isinstance(exc, OSError | smtplib.SMTPException):
            return SmtpNotSent(what, self.phase, self.step)
        return SmtpRefused(what, self.phase, self.step)  # e.g. a non-ASCII address


def _command(client: smtplib.SMTP, name: str) -> tuple[int, bytes]:
    client.putcmd(name)
    return client.getreply()


def _content(client: smtplib.SMTP, content: bytes) -> tuple[int, bytes]:
    client.send(content)
    return client.getreply()


def _dot_stuffed(content: bytes) -> bytes:
    """RFC 5321 4.5.2: a leading dot doubled, then the end-of-data line."""
    stuffed = re.sub(rb"(?m)^\.", b"..", content)
    if not stuffed.endswith(b"\r\n"):
        stuffed += b"\r\n"
    return stuffed + b".\r\n"


def _enhanced_status(text: bytes) -> str:
    """The reply's enhanced status code (``5.1.1``), the only part of its text we repeat."""
    found = re.match(rb"\s*([245]\.\d{1,3}\.\d{1,3})\b", text)
    return found.group(1).decode() if found else ""

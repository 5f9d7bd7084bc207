"""The audit topic: who did what to the ledger as an operator, and with which credential.

Every operator decision, freeze, unfreeze and approval writes one ``AuditRecord`` to
``<prefix>.audit`` (deleted after 90 days, never compacted), keyed by the operation key, or
``~freeze/<scope>`` for a freeze or unfreeze, so a key's timeline shows the decisions on it
and the freezes of its action.

Order: the audit record is written, and acknowledged by every in-sync replica, **before**
the command. When it cannot be written, the command is not sent (``AuditNotWritten`` says
so): an operator action the audit topic does not show cannot exist. The other order would
leave, after a crash or a broker outage between the two writes, a decision in force that no
audit record names. The price is a record announcing a command that then failed or was
refused; the record names the command's event id, and the command's own record (an
``OperatorResolution`` or ``Containment`` with that id in the attempts topic) tells whether
it was written.

The identity is never a free-text field of a request: the gateway takes it from the
operator's API key (gateway/auth.py), the CLI, which runs on a trusted host with the
ledger's own Kafka credentials, from ``--operator``, ``LEDGER_OPERATOR`` or the OS user.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import socket
import time
import uuid
from dataclasses import dataclass

from confluent_kafka import KafkaException

from ledger_stream.config import Settings
from ledger_stream.domain import events as ev
from ledger_stream.kafka.exceptions import DeliveryFailed, KafkaSetupError, kafka_error_text
from ledger_stream.kafka.producer import EventProducer
from ledger_stream.serde import AvroCodec, SerdeError

ACK_TIMEOUT_S = 10.0
ROLE_OPERATOR = "operator"  # a gateway operator key
ROLE_CLI = "cli"  # a command on a trusted host
ROLE_APPROVER = "approver"


class AuditNotWritten(Exception):
    """The audit record could not be written, so the command was not sent (says why)."""


@dataclass(frozen=True)
class Actor:
    """Who acts: ``who`` (the operator), ``role`` and ``credential`` (an API key's id, or
    ``host:<name>`` for the CLI)."""

    who: str
    role: str
    credential: str

    @classmethod
    def from_cli(cls, operator: str | None = None) -> Actor:
        """The CLI's operator: ``operator`` (``--operator``), else ``LEDGER_OPERATOR``,
        else the OS user; the credential is this host."""
        who = (operator or os.environ.get("LEDGER_OPERATOR") or "").strip() or _os_user()
        return cls(who, ROLE_CLI, f"host:{socket.gethostname()}")


def record(settings: Settings, bootstrap: str, codec: AvroCodec, actor: Actor,
           action: ev.AuditAction, key: str, command_id: str, detail: str = ""
           ) -> ev.AuditRecord:
    """Write one audit record and wait until every in-sync replica has it. Returns the
    record; AuditNotWritten when it is not acknowledged within ACK_TIMEOUT_S (the caller
    then must not send its command)."""
    if not actor.who:
        raise AuditNotWritten("no operator identity: the audit record needs one")
    event = ev.AuditRecord(uuid.uuid4().hex, actor.who, actor.role, actor.credential, action,
                           key, command_id, detail, int(time.time() * 1000))
    producer: EventProducer | None = None
    try:
        producer = EventProducer(settings, bootstrap, codec, acks="all",
                                 **{"message.timeout.ms": int(ACK_TIMEOUT_S * 1000)})
        producer.deliver("audit", event, timeout_s=ACK_TIMEOUT_S + 1)
    except (DeliveryFailed, KafkaSetupError, SerdeError) as exc:
        raise AuditNotWritten(f"the audit record of this {action.value} could not be "
                              f"written to {settings.topic('audit')} ({exc}); the "
                              f"{action.value} was not sent (does the topic exist? "
                              "`ledger-stream topics create`)") from exc
    except KafkaException as exc:
        raise AuditNotWritten(f"the audit record of this {action.value} could not be "
                              f"written ({kafka_error_text(exc)}); the {action.value} was "
                              "not sent") from exc
    finally:
        if producer is not None:
            with contextlib.suppress(DeliveryFailed, KafkaException):
                producer.close(1)
    return event


def record_approval(settings: Settings, bootstrap: str, codec: AvroCodec, actor: Actor,
                    key: str, approval_id: str, detail: str = "") -> ev.AuditRecord:
    """The audit record of an approval issued for ``key`` (its id ``approval_id``), to be
    written before the approval is handed out; AuditNotWritten as ``record``. ``detail``:
    e.g. the expiry and the argument hash's prefix, never argument values."""
    return record(settings, bootstrap, codec, actor, ev.AuditAction.APPROVAL, key,
                  approval_id, detail)


def approval_detail(approval: ev.Approval, signing_key_id: str) -> str:
    """An approval's audit detail: the arguments' hash prefix, the approver key and the
    expiry; never argument values or the signature."""
    return (f"args {approval.payload_hash[:12]}, approver key {signing_key_id}, expires "
            f"{approval.expires_at_ms}")


def _os_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry for the uid (a container)
        return f"uid:{os.getuid()}"

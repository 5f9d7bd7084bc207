"""A local SMTP server for tests that keeps its own ledger of every mail it accepted.

    python -m tests.smtp_server --port 0 --ledger FILE [--delay-after-data S]

For every message it appends one JSON line ``{"message_id", "ledger_key", "attempt_id",
"to", "subject", "at"}`` to FILE and fsyncs it (and with ``--maildir DIR`` delivers the mail
into that Maildir, as a mailbox server would), *then* (with ``--delay-after-data``) waits
before answering 250, so a client with a shorter timeout gives up on a mail that was
accepted. Recipients at ``refused.test`` get 550, at ``tempfail.test`` 451. Prints
``smtp listening on 127.0.0.1:<port>`` when ready; exits 0 on SIGTERM or SIGINT.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import mailbox
import os
import signal
import sys
from email.parser import BytesHeaderParser
from email.policy import default as default_policy
from pathlib import Path
from typing import Any

from aiosmtpd.controller import Controller

from ledger_lab.local_kafka.ports import pick_free_ports

HOST = "127.0.0.1"
REFUSED_DOMAIN = "refused.test"
TEMPFAIL_DOMAIN = "tempfail.test"


class LedgerHandler:
    """aiosmtpd handler: refuses the test domains, records every accepted mail."""

    def __init__(self, ledger: Path, delay_after_data_s: float = 0.0,
                 maildir: Path | None = None) -> None:
        self.ledger = ledger
        self.delay_after_data_s = delay_after_data_s
        self.maildir = mailbox.Maildir(maildir, create=True) if maildir else None

    async def handle_RCPT(self, server: Any, session: Any, envelope: Any, address: str,
                          rcpt_options: list[str]) -> str:
        domain = address.rpartition("@")[2].lower()
        if domain == REFUSED_DOMAIN:
            return "550 5.1.1 recipient refused"
        if domain == TEMPFAIL_DOMAIN:
            return "451 4.3.0 try again later"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        headers = BytesHeaderParser(policy=default_policy).parsebytes(envelope.content)
        entry = {
            "message_id": _text(headers.get("Message-ID")),
            "ledger_key": _text(headers.get("X-Ledger-Key")),
            "attempt_id": _text(headers.get("X-Attempt-Id")),
            "to": list(envelope.rcpt_tos),
            "subject": _text(headers.get("Subject")),
            "at": dt.datetime.now(dt.UTC).isoformat(),
        }
        self._append(json.dumps(entry))
        if self.maildir is not None:
            self.maildir.add(envelope.content)
        if self.delay_after_data_s > 0:
            await asyncio.sleep(self.delay_after_data_s)
        return "250 OK accepted"

    def _append(self, line: str) -> None:
        with self.ledger.open("a", encoding="utf-8") as out:
            out.write(line + "\n")
            out.flush()
            os.fsync(out.fileno())


def _text(header: object) -> str | None:
    return None if header is None else str(header)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.smtp_server", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--ledger", type=Path, required=True, help="JSON lines, one per mail")
    parser.add_argument("--delay-after-data", type=float, default=0.0, metavar="S",
                        help="seconds to wait between recording a mail and answering 250")
    parser.add_argument("--maildir", type=Path, default=None,
                        help="also deliver every accepted mail into this Maildir")
    args = parser.parse_args(argv)
    # Block the stop signals before the server thread starts, so that it inherits the mask
    # and the main thread alone receives them, in sigwait.
    stop_signals = {signal.SIGTERM, signal.SIGINT}
    signal.pthread_sigmask(signal.SIG_BLOCK, stop_signals)
    port = args.port or pick_free_ports(1, HOST)[0]  # aiosmtpd cannot bind port 0 itself
    args.ledger.touch()
    controller = Controller(LedgerHandler(args.ledger, args.delay_after_data, args.maildir),
                            hostname=HOST, port=port, ready_timeout=15)
    controller.start()
    print(f"smtp listening on {HOST}:{port}", flush=True)
    signal.sigwait(stop_signals)
    controller.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())

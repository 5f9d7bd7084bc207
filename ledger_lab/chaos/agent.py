"""One chaos agent: a seeded mix of intents through ``LedgerClient.submit``, journaled.

Run as ``python -m ledger_lab.chaos.agent`` by the soak (it is SIGKILLed and restarted
like any agent worker). Every intent is journaled twice: ``sent`` before it is produced and,
once ``submit`` returns or raises, ``answer`` (a receipt came), ``timeout`` (the intent was
acknowledged but no answer came within the wait) or ``error`` (the SDK says it was not
acknowledged). The checker holds the ledger to the acknowledged ones.

The mix, per operation: a fresh approved refund (payments, a target that is called only
under a grant), a fresh write (PostgreSQL), a duplicate of an earlier intent sent at once
(the original may still be in flight), a conflict (an earlier key with another amount), a
replay of an answered intent (origin ``replay``; what was answered includes rejected
conflicts, replayed as they were), a refund without an approval. Until the history has
something to repeat, a repeat is a fresh refund.

A restarted agent (same name, next incarnation) first resumes: every intent its earlier
incarnations journaled as sent but never saw answered is submitted again, same key and
arguments, origin ``resume``, as a LangGraph worker resuming from its checkpoint would.
"""

from __future__ import annotations

import argparse
import json
import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from ledger_stream.config import Settings
from ledger_stream.domain import events as ev
from ledger_stream.domain.approval import ApprovalSigner, sign_approval
from ledger_stream.domain.keys import args_hash
from ledger_stream.operate.approvals import load_signer
from ledger_stream.sdk import LedgerClient
from ledger_stream.sdk.errors import LedgerUnavailable

OPERATIONS = {"fresh_refund": 30, "fresh_write": 20, "duplicate": 18, "conflict": 8,
              "replay": 14, "unapproved": 10}
REFUND_TARGET, WRITE_TARGET = "payments", "ledger-db"
WORKFLOW = ev.Workflow("chaos-agent", "1.0")
SUBMIT_WAIT_S = 15.0
IN_FLIGHT = 64


@dataclass(frozen=True)
class Sent:
    key: str
    target: str
    args: dict[str, Any]
    approved: bool


class Journal:
    """Append-only JSON lines, written through at once (a SIGKILL loses no written line)."""

    def __init__(self, path: Path) -> None:
        self._fh: IO[str] = path.open("a", buffering=1)
        self._lock = threading.Lock()

    def write(self, **fields: Any) -> None:
        with self._lock:
            self._fh.write(json.dumps(fields, separators=(",", ":")) + "\n")

    def close(self) -> None:
        self._fh.close()


class Agent:
    def __init__(self, client: LedgerClient, journal: Journal, name: str, seed: int,
                 signer: ApprovalSigner | None) -> None:
        self.client, self.journal, self.name = client, journal, name
        self.resumed: list[Sent] = []  # earlier incarnations' unanswered intents
        self.rng = random.Random(seed)
        self.signer = signer
        self.sent: list[Sent] = []
        self.answered: list[Sent] = []
        self._lock = threading.Lock()
        self._n = 0

    def next_operation(self) -> tuple[str, Sent, ev.Origin]:
        """Pick the next operation (under the lock: the RNG and the histories are shared)."""
        with self._lock:
            if self.resumed:
                item = self.resumed.pop()
                self.sent.append(item)
                return "resume", item, ev.Origin.RESUME
            op = self.rng.choices(list(OPERATIONS), weights=list(OPERATIONS.values()))[0]
            if op == "duplicate" and self.sent:
                return op, self.rng.choice(self.sent[-50:]), ev.Origin.RESUME
            if op == "replay" and self.answered:
                return op, self.rng.choice(self.answered), ev.Origin.REPLAY
            if op == "conflict" and self.sent:
                was = self.rng.choice(self.sent[-50:])
                args = {**was.args, "amount": was.args["amount"] + 1 + self.rng.randrange(99)}
                return op, Sent(was.key, was.target, args, was.approved), ev.Origin.FRESH
            self._n += 1
            amount = self.rng.randrange(100, 100_000)
            if op == "fresh_write":
                item = Sent(f"acme/credit/{self.name}-{self._n}", WRITE_TARGET,
                            {"amount": amount}, False)
            else:
                op = "unapproved" if op == "unapproved" else "fresh_refund"
                item = Sent(f"acme/refund/{self.name}-{self._n}", REFUND_TARGET,
                            {"amount": amount, "currency": "EUR"}, op == "fresh_refund")
            self.sent.append(item)
            return op, item, ev.Origin.FRESH

    def run_one(self) -> None:
        op, item, origin = self.next_operation()
        approval = None
        if item.approved and self.signer is not None:
            approval = sign_approval(self.signer, item.key, f"ap-{self.name}",
                                     args_hash(item.args), "",
                                     int(time.time() * 1000) + 3_600_000)
        intent = self.client.intent(item.key, item.key.split("/")[1], item.target, item.args,
                                    workflow=WORKFLOW, approval=approval, origin=origin)
        self.journal.write(t="sent", op=op, key=item.key, event=intent.event_id,
                           target=item.target, args=item.args, args_hash=intent.args_hash,
                           approved=approval is not None)
        try:
            receipt = self.client.submit(intent, wait=SUBMIT_WAIT_S, raise_errors=False)
        except LedgerUnavailable as exc:
            self.journal.write(t="error", event=intent.event_id, error=str(exc)[:200])
            return
        except TimeoutError:
            self.journal.write(t="timeout", event=intent.event_id)
            return
        self.journal.write(t="answer", event=intent.event_id, status=receipt.key_status.value,
                           reason=receipt.reason.value)
        if receipt.key_status.value in ("succeeded", "failed", "rejected"):
            with self._lock:
                self.answered.append(item)


def unanswered(journals: list[Path]) -> list[Sent]:
    """Intents earlier incarnations sent and never saw answered (nor refused), in order."""
    sent: dict[str, Sent] = {}
    for path in journals:
        for line in path.read_text().splitlines() if path.exists() else ():
            try:
                row = json.loads(line)
            except ValueError:
                continue  # the last line of a killed incarnation may be cut
            if row.get("t") == "sent" and "args" in row:
                sent[row["event"]] = Sent(row["key"], row["target"], row["args"],
                                          row["approved"])
            elif row.get("event") in sent:
                del sent[row["event"]]
    return list(sent.values())


def run(args: argparse.Namespace) -> None:
    settings = Settings()
    signer = load_signer(settings.approval_signing_key) \
        if settings.approval_signing_key else None
    journal = Journal(Path(args.journal))
    client = LedgerClient(settings)
    agent = Agent(client, journal, args.name, args.seed, signer)
    agent.resumed = unanswered([Path(p) for p in args.resume])[::-1]
    slots = threading.BoundedSemaphore(IN_FLIGHT)

    def one() -> None:
        try:
            agent.run_one()
        finally:
            slots.release()

    start = time.monotonic()
    with ThreadPoolExecutor(IN_FLIGHT) as pool:
        n = 0
        while time.time() < _until(args):
            due = start + n / args.rate
            time.sleep(max(0.0, due - time.monotonic()))
            slots.acquire()
            pool.submit(one)
            n += 1
    client.close()
    journal.close()


def _until(args: argparse.Namespace) -> float:
    """When to stop: ``--until``, or later when the soak moved it on in ``--until-file``
    (a phase that held the load extends it by the time it held)."""
    if args.until_file:
        try:
            return max(args.until, float(Path(args.until_file).read_text()))
        except (OSError, ValueError):  # not written yet (it is replaced whole)
            pass
    return float(args.until)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--journal", required=True, help="JSON lines file to append to")
    parser.add_argument("--name", required=True, help="this agent's id, part of its keys")
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--rate", type=float, required=True, help="intents per second")
    parser.add_argument("--until", type=float, required=True, help="stop at this Unix time")
    parser.add_argument("--until-file", default="",
                        help="a file the soak may write a later stop time to")
    parser.add_argument("--resume", nargs="*", default=[],
                        help="earlier incarnations' journals: their unanswered intents first")
    run(parser.parse_args())


if __name__ == "__main__":
    main()

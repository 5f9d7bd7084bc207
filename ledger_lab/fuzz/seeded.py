"""Hostile input for the ledger's readers, without a broker: random and mutated Avro bytes,
wrong fingerprints, oversized fields, null and foreign keys, records in the wrong partition,
missing and forged approvals, through the codec and the processor's input path (step a:
read, decide, encode, over in-memory stores).

Every case must end in a typed result, and the promises checked are the processor's own:

- the codec returns an event or raises DecodeError (nothing else);
- the step never raises; a record it cannot read becomes a PoisonInput whose only outputs
  are one DLQ record and one ``poison_input`` alert, and it changes no key;
- every output encodes and decodes again;
- no Dispatch follows an intent that needed an approval and had no valid one; validity is
  judged here, independently of ``ledger_stream.domain.approval`` (the signature recomputed
  from the documented signed text, the hash, the expiry at the partition clock), for every
  intent that reads as valid, mutated or not;
- every intent read as valid gets exactly one receipt naming it, every claim exactly one
  answer naming its claim id;
- a record that cannot be read changes no key and no freeze of its partition.

A violation is reported with the seed and the case number that reproduce it.
"""

from __future__ import annotations

import random
import time
import traceback
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from ledger_lab.harness.approvers import seeded_approver, trusted
from ledger_lab.harness.records import FakeMessage
from ledger_stream.domain import events as ev
from ledger_stream.domain.approval import sign_approval
from ledger_stream.domain.keys import args_hash, canonical_json
from ledger_stream.domain.policy import Policy
from ledger_stream.domain.state import absent
from ledger_stream.domain.transitions import expire_if_due
from ledger_stream.kafka.partitioner import partition_for
from ledger_stream.processor.batch import Batch
from ledger_stream.processor.changelog import Positions
from ledger_stream.processor.step import LedgerStep
from ledger_stream.serde import AvroCodec, DecodeError
from ledger_stream.state import MemoryPartitionStore, decode_row

PARTITIONS = 4
INTENTS, ATTEMPTS = "fuzz.intents", "fuzz.attempts"
# Deterministic approver keys: the trusted one, a trusted but revoked one, and a forger's
# key under the trusted key's id.
APPROVER = seeded_approver("fuzz", "fuzz approver")
REVOKED = seeded_approver("fuzz-old", "fuzz revoked approver")
FORGER = seeded_approver("fuzz", "fuzz forger")
STRANGER = seeded_approver("fuzz-unknown", "fuzz stranger")
# A replay window of four hours of partition clock (which advances about a second per record
# per partition), so keys settle, seal (EXPIRED) and are asked again within one store's life.
POLICY = Policy(approval_keys=trusted(APPROVER, REVOKED, revoked=frozenset({REVOKED.key_id})),
                approval_required_actions=frozenset({"payout"}),
                retry_backoff_ms=0, replay_window_ms=4 * 3_600_000)
CHUNK = 500  # records per batch
RESET_EVERY = 200  # batches: fresh stores (memory stays bounded)
BASE_MS = 1_796_000_000_000


@dataclass
class FuzzReport:
    cases: int = 0
    seed: int = 0
    kinds: Counter[str] = field(default_factory=Counter)  # how each case ended
    violations: list[str] = field(default_factory=list)  # the first ones, reproducible
    violation_count: int = 0
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {"cases": self.cases, "seed": self.seed, "kinds": dict(self.kinds),
                "violations": self.violation_count, "first_violations": self.violations,
                "seconds": round(self.seconds, 1),
                "cases_per_second": round(self.cases / self.seconds) if self.seconds else 0}


class Generator:
    """Records: valid events of every input type (and some output types, which are poison
    on an input topic), then mutated, with hostile keys and partitions."""

    def __init__(self, rng: random.Random, codec: AvroCodec) -> None:
        self.rng, self.codec = rng, codec
        self.keys = [f"{t}/{a}/k{i}" for t in ("acme", "beta") for a in ("refund", "payout")
                     for i in range(40)]
        self.claims: dict[str, tuple[int, str]] = {}  # key -> (attempt, claim id) claimed
        self.args: dict[str, dict[str, Any]] = {}  # key -> the arguments last sent for it

    def record(self) -> tuple[str, bytes | None, bytes | None, Any]:
        """(topic, key, value, the event before mutation or None)."""
        rng = self.rng
        event = self._event()
        value: bytes | None = self.codec.encode(event)
        key: bytes | None = (
            getattr(event, "key", "").encode() if not isinstance(event, ev.Tick | ev.Containment)
            else b"~tick" if isinstance(event, ev.Tick)
            else f"~containment/{event.event_id}".encode())
        topic = INTENTS if isinstance(event, ev.Intent) else ATTEMPTS
        roll = rng.random()
        if roll < 0.3:
            value = self._mutate(value)
        elif roll < 0.35:
            value = bytes(rng.getrandbits(8) for _ in range(rng.randrange(0, 300)))
        elif roll < 0.37:
            value = None
        if rng.random() < 0.08:
            key = rng.choice([None, b"\xff\xfe\x00bad", b"", rng.choice(self.keys).encode(),
                              b"acme/refund", b"~containment/x"])
        if rng.random() < 0.05:
            topic = INTENTS if topic == ATTEMPTS else ATTEMPTS
        return topic, key, value, event if value is not None else None

    def _event(self) -> Any:
        rng = self.rng
        key = rng.choice(self.keys)
        at = BASE_MS + rng.randrange(0, 10_000_000)
        kind = rng.randrange(10)
        if kind < 4:
            return self._intent(key, at)
        attempt, claim_id = self.claims.get(key, (1, f"claim-{rng.randrange(5)}"))
        if rng.random() < 0.3:  # not the holder, or another attempt
            attempt, claim_id = rng.randrange(0, 4), f"claim-{rng.randrange(5)}"
        if kind == 4:
            if rng.random() < 0.5:
                attempt, claim_id = self.claims.get(key, (1, ""))[0], f"claim-{rng.getrandbits(16)}"
                self.claims[key] = (attempt, claim_id)
            return ev.AttemptClaim(f"c-{rng.getrandbits(32)}", key, attempt, claim_id, "conn",
                                   rng.choice([1, 10_000, 600_000]), at, rng.random() < 0.5)
        if kind == 5:
            status = rng.choice(list(ev.OutcomeStatus))
            if status in (ev.OutcomeStatus.NOT_APPLIED, ev.OutcomeStatus.NOT_CALLED):
                self.claims[key] = (attempt + 1, "")
            return ev.AttemptOutcome(f"o-{rng.getrandbits(32)}", key, attempt, claim_id,
                                     status, at, f"ext-{rng.randrange(3)}",
                                     rng.choice(["", "timeout"]), rng.random() < 0.5)
        if kind == 6:
            return ev.ReconcileResult(f"r-{rng.getrandbits(32)}", key, rng.randrange(0, 4),
                                      f"claim-{rng.randrange(5)}",
                                      rng.choice(list(ev.ReconcileStatus)),
                                      rng.random() < 0.5, at, f"ext-{rng.randrange(3)}")
        if kind == 7:
            return ev.OperatorResolution(f"d-{rng.getrandbits(32)}", key, rng.randrange(0, 4),
                                         rng.choice(list(ev.Resolution)), "ops", at,
                                         f"ext-{rng.randrange(3)}", "checked")
        if kind == 8:
            partition = rng.randrange(PARTITIONS + 1)
            if rng.random() < 0.5:
                return ev.Tick(partition, "fuzz", at)
            return ev.Containment(f"f-{rng.randrange(4)}", partition,
                                  rng.choice(["refund", "payout", "", "re/fund"]),
                                  rng.choice(["", "acme", "*"]), rng.random() < 0.6,
                                  rng.choice(list(ev.FreezeMode)), "incident", "ops", at)
        return ev.Receipt("x", key, "i", ev.ReceiptStatus.SUCCEEDED, ev.Reason.NONE, "h", 1,
                          at)  # an output type: poison on an input topic

    def _intent(self, key: str, at: int) -> ev.Intent:
        rng = self.rng
        args: dict[str, Any] = {"amount": rng.randrange(1, 10**6), "to": "cust"}
        if rng.random() < 0.05:
            args["note"] = "x" * rng.randrange(1000, 20_000)  # oversized field
        if key in self.args and rng.random() < 0.4:
            args = self.args[key]  # a duplicate: the same arguments again
        self.args[key] = args
        text, digest = canonical_json(args), args_hash(args)
        tenant, action = key.split("/")[:2]
        approval = None
        roll = rng.random()
        if roll < 0.3:
            approval = sign_approval(APPROVER, key, "ap", digest, "", at + 60_000)
        elif roll < 0.4:
            forger = rng.choice([FORGER, REVOKED, STRANGER])
            approval = sign_approval(forger, key, "ap", digest, "", at + 60_000)
        elif roll < 0.45:
            approval = sign_approval(APPROVER, key, "ap", "0" * 64, "", at + 60_000)
        elif roll < 0.5:
            approval = sign_approval(APPROVER, key, "ap", digest, "", at - 1)  # expired
        if rng.random() < 0.05:
            tenant = "other"  # a key of another tenant
        if rng.random() < 0.03:
            digest = "f" * 64
        return ev.Intent(f"i-{rng.getrandbits(48)}", key, tenant, action, "sandbox", text,
                         digest, ev.Workflow(rng.choice(["fuzz", "fuzz", "other"]),
                                             rng.choice(["1.0", "1.0", "1.1", "2.0"]), "t"), at,
                         approval=approval, origin=rng.choice(list(ev.Origin)))

    def _mutate(self, value: bytes | None) -> bytes:
        rng, data = self.rng, bytearray(value or b"")
        for _ in range(rng.randrange(1, 4)):
            op = rng.randrange(6)
            if op == 0 and data:  # flip bits
                i = rng.randrange(len(data))
                data[i] ^= 1 << rng.randrange(8)
            elif op == 1 and data:  # truncate
                del data[rng.randrange(len(data)):]
            elif op == 2:  # append garbage
                data += bytes(rng.getrandbits(8) for _ in range(rng.randrange(1, 40)))
            elif op == 3 and len(data) > 10:  # a wrong fingerprint
                data[2:10] = bytes(rng.getrandbits(8) for _ in range(8))
            elif op == 4 and len(data) > 11:  # a huge length or number (a long varint)
                i = rng.randrange(10, len(data))
                data[i:i + 1] = b"\xff\xff\xff\xff\xff\xff\xff\xff\x7f"
            elif op == 5 and data:  # overwrite a byte
                data[rng.randrange(len(data))] = rng.getrandbits(8)
        return bytes(data)


def run_fuzz(cases: int, seed: int = 1, *, step: LedgerStep | None = None,
             progress: Callable[[FuzzReport], None] | None = None,
             keep: int = 20) -> FuzzReport:
    """Run ``cases`` hostile records (reproducible from ``seed``)."""
    rng = random.Random(seed)
    codec = AvroCodec()
    step = step or LedgerStep(POLICY, codec, {INTENTS: "intents", ATTEMPTS: "attempts"},
                              PARTITIONS)
    gen = Generator(rng, codec)
    report = FuzzReport(seed=seed)
    started = time.perf_counter()
    stores: dict[int, MemoryPartitionStore] = {}
    offset = 0
    for batch_no in range((cases + CHUNK - 1) // CHUNK):
        if batch_no % RESET_EVERY == 0:
            stores = {p: MemoryPartitionStore(p) for p in range(PARTITIONS)}
        batch = Batch(step, stores, {p: Positions() for p in range(PARTITIONS)},  # type: ignore[arg-type]
                      (INTENTS, ATTEMPTS))
        for _ in range(min(CHUNK, cases - report.cases)):
            case = report.cases
            report.cases += 1
            offset += 1
            try:
                why = _one(step, batch, gen, codec, offset, report)
            except Exception:  # noqa: BLE001 - any exception here is the finding
                why = "raised " + traceback.format_exc(limit=3).replace("\n", " | ")
            if why:
                report.violation_count += 1
                if len(report.violations) < keep:
                    report.violations.append(f"seed {seed} case {case}: {why}")
        for partition, overlay in batch.overlays.items():  # step d, as the checkpoint does
            stores[partition].write(overlay.store_batch(None))
        if progress is not None and (batch_no + 1) % 200 == 0:
            report.seconds = time.perf_counter() - started
            progress(report)
    report.seconds = time.perf_counter() - started
    return report


def _one(step: LedgerStep, batch: Batch, gen: Generator, codec: AvroCodec, offset: int,
         report: FuzzReport) -> str:
    """One generated record through the codec and step a; what broke a promise ("" when
    nothing)."""
    topic, key, value, original = gen.record()
    home = partition_for(key, PARTITIONS) if key else 0
    if isinstance(original, ev.Tick | ev.Containment) and original.partition < PARTITIONS:
        home = original.partition  # written to the partition it names
    partition = home if gen.rng.random() < 0.9 else gen.rng.randrange(PARTITIONS)
    return judge(step, batch, codec, topic, key, value, partition, offset,
                 gen.rng.randrange(0, 2_000), report)


def judge(step: LedgerStep, batch: Batch, codec: AvroCodec, topic: str, key: bytes | None,
          value: bytes | None, partition: int, offset: int, ts_step_ms: int,
          report: FuzzReport) -> str:
    """One record (topic, key, value, partition) through the codec and step a, checked
    against every promise; what broke one ("" when nothing). Shared by the seeded
    generator and the coverage-guided engine (coverage.py)."""
    if value is not None:
        try:
            codec.decode(value)
            report.kinds["decoded"] += 1
        except DecodeError:
            report.kinds["decode_error"] += 1
    text_key = key.decode("utf-8", "replace") if key else ""
    overlay = batch.overlay(partition)
    ts = max(overlay.clock, BASE_MS) + ts_step_ms
    read = step.read(value, key, topic, partition, offset, ts)
    before_state = overlay.state(text_key) if text_key.count("/") >= 2 else None
    before = overlay.changed_states()
    containment_before = overlay.containment()
    first = len(batch.outputs)
    batch.add(FakeMessage(topic, partition, offset, ts, key, value))  # type: ignore[arg-type]
    outputs = [codec.decode(o.value) for o in batch.outputs[first:]]
    for out in outputs:
        if isinstance(out, ev.Alert):
            report.kinds[f"alert {out.kind.value}"] += 1
    if isinstance(read, ev.PoisonInput):
        report.kinds["poison"] += 1
        # Deadlines the record's timestamp passed fire first; then the DLQ record and alert.
        *timers, letter, alert = outputs if len(outputs) >= 2 else (None, None)
        if not (isinstance(letter, ev.DeadLetter) and isinstance(alert, ev.Alert)
                and alert.kind is ev.AlertKind.POISON_INPUT) \
                or any(isinstance(o, ev.DeadLetter) for o in timers):
            return f"poison {read.reason!r} gave {[type(o).__name__ for o in outputs]}"
        touched = {getattr(o, "key", None) for o in timers}
        changed = {k for k, v in overlay.changed_states().items() if before.get(k) is not v
                   and not _sealed_by_its_deadline(overlay, before, k, v, ts)}
        if changed - touched:
            return f"poison {read.reason!r} changed keys {sorted(changed - touched)[:3]}"
        if overlay.containment() is not containment_before and not timers:
            return f"poison {read.reason!r} changed the partition's freezes"
        return ""
    report.kinds["decided"] += 1
    if isinstance(read, ev.Intent):
        answers = [o for o in outputs if isinstance(o, ev.Receipt)
                   and o.intent_event_id == read.event_id]
        if len(answers) != 1 and not _reserved_before(before_state, read):
            return f"intent {read.event_id} got {len(answers)} receipts"
        dispatched = any(isinstance(o, ev.Dispatch) and o.intent_event_id == read.event_id
                         for o in outputs)
        if dispatched and read.action == "payout" and not _approved(read, ts):
            return f"dispatched {read.key} although it has no valid approval"
    if isinstance(read, ev.AttemptClaim):
        named = [o for o in outputs if isinstance(o, ev.Grant | ev.Held | ev.Done | ev.Reconcile)
                 and o.claim_id == read.claim_id and o.key == read.key]
        if len(named) != 1:
            return f"claim {read.claim_id} got {len(named)} answers"
    return ""


def _sealed_by_its_deadline(overlay: Any, before: dict[str, Any], key: str, after: Any,
                            now_ms: int) -> bool:
    """The one silent change a deadline makes, which a poison record's timestamp may cause:
    a terminal key sealed because the clock passed its replay window. Exactly that: the
    state after is the seal of the state before (from this batch, or from the store)."""
    if key in before:
        prior = before[key]
    else:  # not changed earlier in this batch: the store still holds its state
        row = overlay.store.get(key)
        prior = decode_row(row) if row is not None else absent(key)
    return bool(after == expire_if_due(prior, now_ms, POLICY) != prior)


def _reserved_before(state: Any, intent: ev.Intent) -> bool:
    """An intent that repeats the reserving one's event id is answered by its state
    receipts too (a replayed record): more than one receipt may name it."""
    return state is not None and getattr(state, "intent_event_id", "") == intent.event_id


def _approved(intent: ev.Intent, now_ms: int) -> bool:
    """Whether ``intent`` carries a valid approval, judged here from the documented signed
    text (not by ledger_stream.domain.approval): signed by the one unrevoked approver key,
    for this key and these arguments, not expired at the partition clock."""
    a = intent.approval
    if a is None or a.payload_hash != intent.args_hash or a.expires_at_ms <= now_ms:
        return False
    if a.key_id != APPROVER.key_id:
        return False
    text = "\n".join(("ledger-approval-v2", a.key_id, intent.key, a.approval_id,
                      a.payload_hash, a.policy_revision, str(a.expires_at_ms))).encode()
    try:
        Ed25519PublicKey.from_public_bytes(APPROVER.public_bytes()).verify(
            bytes.fromhex(a.signature), text)
    except (InvalidSignature, ValueError):
        return False
    return True

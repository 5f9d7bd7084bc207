"""The ledger's events as frozen value objects.

Inputs reach the processor on ``ledger.intents`` (Intent) and ``ledger.attempts`` (the
attempt-scoped reports). Outputs go to ``ledger.dispatch`` (Dispatch and the answers to
claims), ``ledger.receipts``, ``ledger.alerts`` and ``ledger.dlq``. Every event carries
``at_ms``, the time its producer stamped on it: the only clock the decision core reads.
Field names match the Avro schemas in ``schemas/`` one to one.

Time: ``at_ms`` is the producer's clock, for the timeline only. Decisions read the
partition clock (broker timestamps made monotone per partition, docs/protocol.md), passed
to ``decide`` as ``now_ms``: no client clock decides expiry or leases.

Each class the processor builds per record writes out its ``__init__`` (``init=False``):
the one ``@dataclass`` generates is interpreted Python, one ``object.__setattr__`` call per
field, while mypyc compiles a written-out one into direct slot stores (a tenth of the
cost). It takes the fields in order with their defaults, exactly as the generated one
would (tests/domain/test_written_out.py holds every such class to that).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Origin(StrEnum):
    """Why a worker produced this intent; informational, never changes a decision."""

    FRESH = "fresh"
    RESUME = "resume"
    REPLAY = "replay"
    FORK = "fork"
    OPERATOR = "operator"


class OutcomeStatus(StrEnum):
    SUCCEEDED = "succeeded"
    NOT_APPLIED = "not_applied"  # failed, definitely not applied, retryable
    FAILED = "failed"  # failed, permanent
    UNKNOWN = "unknown"  # timeout or dropped connection after the request was sent
    # The claimant did not call the target and never will for this claim: its grant came
    # after the lease could cover the call, or it gave the claim up (revocation, shutdown).
    # The attempt moves on without counting against max_attempts.
    NOT_CALLED = "not_called"


class ReconcileStatus(StrEnum):
    FOUND = "found"
    NOT_FOUND = "not_found"
    UNQUERYABLE = "unqueryable"


class Resolution(StrEnum):
    APPLIED = "applied"
    NOT_APPLIED = "not_applied"
    FAILED = "failed"


class ReceiptStatus(StrEnum):
    ACCEPTED = "accepted"  # reserved, waiting for a connector
    IN_PROGRESS = "in_progress"  # granted to a connector
    RECONCILING = "reconciling"  # outcome unknown, target being queried
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    REJECTED = "rejected"
    HELD = "held"
    NEEDS_RECONCILIATION = "needs_reconciliation"


TERMINAL_RECEIPTS = frozenset(
    {
        ReceiptStatus.SUCCEEDED,
        ReceiptStatus.FAILED,
        ReceiptStatus.REJECTED,
        ReceiptStatus.HELD,
        ReceiptStatus.NEEDS_RECONCILIATION,
    }
)


class Answer(StrEnum):
    """What one request (one intent) got, beside the key's state: the distinction a
    caller acts on, a graph on replay above all."""

    CREATED = "created"  # this intent holds the key: its effect (state: succeeded or failed)
    ALREADY_DONE = "already_done"  # another, earlier intent's effect: the original outcome
    REJECTED = "rejected"  # refused (reason: conflict, approval, expired_key, ...): no effect
    HELD = "held"  # held (reason: frozen, or version): applied after a release, if ever
    PENDING = "pending"  # no outcome yet (in flight, or waiting for an operator): ask again


class Reason(StrEnum):
    NONE = "none"
    CONFLICT = "conflict"
    APPROVAL = "approval"
    EXPIRED_KEY = "expired_key"
    VERSION = "version"
    MAX_ATTEMPTS = "max_attempts"
    TARGET_REJECTED = "target_rejected"
    OPERATOR = "operator"
    FROZEN = "frozen"  # the action is frozen (containment): recorded, not dispatched


class AlertKind(StrEnum):
    CONFLICTING_ARGUMENTS = "conflicting_arguments"
    DUPLICATE_EFFECT = "duplicate_effect"
    EFFECT_WITHOUT_INTENT = "effect_without_intent"
    APPROVAL_MISMATCH = "approval_mismatch"
    EXPIRED_KEY_REUSE = "expired_key_reuse"
    RECONCILIATION_REQUIRED = "reconciliation_required"
    VERSION_MISMATCH = "version_mismatch"
    POISON_INPUT = "poison_input"
    STALLED = "stalled"  # a key made no progress for longer than the policy allows
    LATE_EFFECT = "late_effect"  # an effect reported for a key already answered "failed"


# --- inputs -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, init=False)
class Approval:
    """A human or policy approval bound to one key and one argument hash (see approval.py)."""

    approval_id: str
    payload_hash: str
    policy_revision: str
    expires_at_ms: int
    signature: str
    # The approver key that signed (its public key is trusted by id); "" only for a
    # development-mode (HMAC) approval and for approvals written before key ids.
    key_id: str = ""

    def __init__(self, approval_id: str, payload_hash: str, policy_revision: str,
                 expires_at_ms: int, signature: str, key_id: str = "") -> None:
        object.__setattr__(self, "approval_id", approval_id)
        object.__setattr__(self, "payload_hash", payload_hash)
        object.__setattr__(self, "policy_revision", policy_revision)
        object.__setattr__(self, "expires_at_ms", expires_at_ms)
        object.__setattr__(self, "signature", signature)
        object.__setattr__(self, "key_id", key_id)


@dataclass(frozen=True, slots=True, init=False)
class Workflow:
    """Which workflow asked: graph id and version, thread and node (for the timeline)."""

    graph: str
    version: str
    thread_id: str = ""
    node: str = ""
    checkpoint_id: str = ""  # the fork's, the replayed, or the step's checkpoint (origin.py)

    def __init__(self, graph: str, version: str, thread_id: str = "", node: str = "",
                 checkpoint_id: str = "") -> None:
        object.__setattr__(self, "graph", graph)
        object.__setattr__(self, "version", version)
        object.__setattr__(self, "thread_id", thread_id)
        object.__setattr__(self, "node", node)
        object.__setattr__(self, "checkpoint_id", checkpoint_id)


@dataclass(frozen=True, slots=True, init=False)
class Observation:
    """A result read from outside before an effect was asked, by digest and size, never its
    content; carried by the step's following intents (``domain/observations.py``)."""

    source: str  # what was asked: "model", "retrieval", "prices"
    digest: str  # hex SHA-256 of the result's canonical encoding
    size: int  # bytes of that encoding
    model: str = ""  # the model (or the source's version) that answered
    trace_id: str = ""  # the trace or run the result came in
    node: str = ""  # the node that observed it
    step: int = -1  # the graph step it was observed at (-1: unknown)

    def __init__(self, source: str, digest: str, size: int, model: str = "", trace_id: str = "",
                 node: str = "", step: int = -1) -> None:
        object.__setattr__(self, "source", source)
        object.__setattr__(self, "digest", digest)
        object.__setattr__(self, "size", size)
        object.__setattr__(self, "model", model)
        object.__setattr__(self, "trace_id", trace_id)
        object.__setattr__(self, "node", node)
        object.__setattr__(self, "step", step)


@dataclass(frozen=True, slots=True, init=False)
class Intent:
    event_id: str
    key: str
    tenant: str
    action: str
    target: str
    args_json: str  # canonical JSON of the material arguments
    args_hash: str
    workflow: Workflow
    at_ms: int
    payload_json: str = ""  # non-material content; the first accepted one wins
    approval: Approval | None = None
    policy_revision: str = ""
    origin: Origin = Origin.FRESH
    observations: tuple[Observation, ...] = ()  # evidence only: never decides anything

    def __init__(self, event_id: str, key: str, tenant: str, action: str, target: str,
                 args_json: str, args_hash: str, workflow: Workflow, at_ms: int,
                 payload_json: str = "", approval: Approval | None = None,
                 policy_revision: str = "", origin: Origin = Origin.FRESH,
                 observations: tuple[Observation, ...] = ()) -> None:
        object.__setattr__(self, "event_id", event_id)
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "tenant", tenant)
        object.__setattr__(self, "action", action)
        object.__setattr__(self, "target", target)
        object.__setattr__(self, "args_json", args_json)
        object.__setattr__(self, "args_hash", args_hash)
        object.__setattr__(self, "workflow", workflow)
        object.__setattr__(self, "at_ms", at_ms)
        object.__setattr__(self, "payload_json", payload_json)
        object.__setattr__(self, "approval", approval)
        object.__setattr__(self, "policy_revision", policy_revision)
        object.__setattr__(self, "origin", origin)
        object.__setattr__(self, "observations", observations)


@dataclass(frozen=True, slots=True, init=False)
class AttemptClaim:
    event_id: str
    key: str
    attempt: int
    claim_id: str
    connector: str
    lease_ms: int
    at_ms: int

    def __init__(self, event_id: str, key: str, attempt: int, claim_id: str, connector: str,
                 lease_ms: int, at_ms: int) -> None:
        object.__setattr__(self, "event_id", event_id)
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "attempt", attempt)
        object.__setattr__(self, "claim_id", claim_id)
        object.__setattr__(self, "connector", connector)
        object.__setattr__(self, "lease_ms", lease_ms)
        object.__setattr__(self, "at_ms", at_ms)


@dataclass(frozen=True, slots=True, init=False)
class AttemptOutcome:
    event_id: str
    key: str
    attempt: int
    claim_id: str
    status: OutcomeStatus
    at_ms: int
    external_id: str = ""
    error: str = ""
    # The reporting connector's declaration that its target refuses a second effect for one
    # key (returning the original receipt): a repeated success with the same external id
    # is then the target's deduplication, not a second effect.
    target_deduplicates: bool = False

    def __init__(self, event_id: str, key: str, attempt: int, claim_id: str, status: OutcomeStatus,
                 at_ms: int, external_id: str = "", error: str = "",
                 target_deduplicates: bool = False) -> None:
        object.__setattr__(self, "event_id", event_id)
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "attempt", attempt)
        object.__setattr__(self, "claim_id", claim_id)
        object.__setattr__(self, "status", status)
        object.__setattr__(self, "at_ms", at_ms)
        object.__setattr__(self, "external_id", external_id)
        object.__setattr__(self, "error", error)
        object.__setattr__(self, "target_deduplicates", target_deduplicates)


@dataclass(frozen=True, slots=True, init=False)
class ReconcileResult:
    event_id: str
    key: str
    attempt: int
    claim_id: str
    status: ReconcileStatus
    target_deduplicates: bool
    at_ms: int
    external_id: str = ""
    error: str = ""

    def __init__(self, event_id: str, key: str, attempt: int, claim_id: str,
                 status: ReconcileStatus, target_deduplicates: bool, at_ms: int,
                 external_id: str = "", error: str = "") -> None:
        object.__setattr__(self, "event_id", event_id)
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "attempt", attempt)
        object.__setattr__(self, "claim_id", claim_id)
        object.__setattr__(self, "status", status)
        object.__setattr__(self, "target_deduplicates", target_deduplicates)
        object.__setattr__(self, "at_ms", at_ms)
        object.__setattr__(self, "external_id", external_id)
        object.__setattr__(self, "error", error)


@dataclass(frozen=True, slots=True, init=False)
class OperatorResolution:
    event_id: str
    key: str
    attempt: int
    resolution: Resolution
    operator: str
    at_ms: int
    external_id: str = ""
    note: str = ""

    def __init__(self, event_id: str, key: str, attempt: int, resolution: Resolution, operator: str,
                 at_ms: int, external_id: str = "", note: str = "") -> None:
        object.__setattr__(self, "event_id", event_id)
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "attempt", attempt)
        object.__setattr__(self, "resolution", resolution)
        object.__setattr__(self, "operator", operator)
        object.__setattr__(self, "at_ms", at_ms)
        object.__setattr__(self, "external_id", external_id)
        object.__setattr__(self, "note", note)


@dataclass(frozen=True, slots=True, init=False)
class PoisonInput:
    """An input that could not be decoded or validated. Built by the runtime, never produced."""

    topic: str
    partition: int
    offset: int
    reason: str
    at_ms: int
    key: bytes | None = None
    value: bytes | None = None

    def __init__(self, topic: str, partition: int, offset: int, reason: str, at_ms: int,
                 key: bytes | None = None, value: bytes | None = None) -> None:
        object.__setattr__(self, "topic", topic)
        object.__setattr__(self, "partition", partition)
        object.__setattr__(self, "offset", offset)
        object.__setattr__(self, "reason", reason)
        object.__setattr__(self, "at_ms", at_ms)
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "value", value)


@dataclass(frozen=True, slots=True, init=False)
class Timer:
    """A key's deadline has come (a lease long past, a reconciliation with no answer, the
    end of the replay window). Built by the runtime from its timer index when the partition
    clock passes the deadline ``due_ms``; never produced to a topic."""

    key: str
    due_ms: int

    def __init__(self, key: str, due_ms: int) -> None:
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "due_ms", due_ms)


@dataclass(frozen=True, slots=True)
class Tick:
    """A record the processor appends to each ``ledger.attempts`` partition it owns when the
    partition was quiet for a while: its broker timestamp moves the partition clock, so
    timers fire on time and identically on replay. Never reaches ``decide``."""

    partition: int
    processor: str
    at_ms: int


class FreezeMode(StrEnum):
    HOLD = "hold"  # record new work, dispatch nothing until the unfreeze
    APPROVAL = "approval"  # new intents of the action need a valid approval


@dataclass(frozen=True, slots=True)
class Containment:
    """An operator's freeze (``frozen``) or unfreeze of one action, for one tenant or every
    tenant (``tenant`` empty), or of one workflow version (``graph`` and ``version``, action
    and tenant empty). Written by ``ledger-stream freeze`` (``drain --hold``) to every
    partition of ``ledger.attempts``, each copy naming its partition (like a Tick), so each
    partition's processor applies it at a definite point of its log; the processor keeps the
    active freezes with the partition's state. Never reaches ``decide``."""

    event_id: str
    partition: int
    action: str
    tenant: str
    frozen: bool
    mode: FreezeMode
    reason: str
    operator: str
    at_ms: int
    # A freeze by workflow version holds the new intents whose workflow is (graph, version);
    # keys already in flight under that version finish.
    graph: str = ""
    version: str = ""


class AuditAction(StrEnum):
    DECISION = "decision"  # an operator's decision on a key waiting for one
    FREEZE = "freeze"
    UNFREEZE = "unfreeze"
    APPROVAL = "approval"  # an approval issued for a key


@dataclass(frozen=True, slots=True)
class AuditRecord:
    """Who did what to the ledger as an operator, and with which credential: written to the
    audit topic before the command itself (operate/audit.py). ``key`` is the operation key
    (decision, approval) or ``~freeze/<scope>`` (freeze, unfreeze); ``detail`` names the
    command's own fields (resolution, attempt, mode), never argument values or free text."""

    event_id: str
    who: str
    role: str  # operator (a gateway operator key), cli (a trusted host), approver
    credential: str  # which key: its id (never the key), or the host for the CLI
    action: AuditAction
    key: str
    command_id: str  # the event id of the command this record announces
    detail: str
    at_ms: int


@dataclass(frozen=True, slots=True, init=False)
class Release:
    """An unfreeze reached a key whose dispatch it held (``scope``: the freeze's). Built by
    the runtime, in the order the keys were held; never produced to a topic."""

    key: str
    scope: str

    def __init__(self, key: str, scope: str) -> None:
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "scope", scope)


AttemptEvent = AttemptClaim | AttemptOutcome | ReconcileResult | OperatorResolution
InputEvent = Intent | AttemptEvent | PoisonInput | Timer | Release


# --- outputs ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, init=False)
class Dispatch:
    dispatch_id: str
    key: str
    attempt: int
    intent_event_id: str
    tenant: str
    action: str
    target: str
    args_json: str
    args_hash: str
    payload_json: str
    not_before_ms: int
    at_ms: int

    def __init__(self, dispatch_id: str, key: str, attempt: int, intent_event_id: str, tenant: str,
                 action: str, target: str, args_json: str, args_hash: str, payload_json: str,
                 not_before_ms: int, at_ms: int) -> None:
        object.__setattr__(self, "dispatch_id", dispatch_id)
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "attempt", attempt)
        object.__setattr__(self, "intent_event_id", intent_event_id)
        object.__setattr__(self, "tenant", tenant)
        object.__setattr__(self, "action", action)
        object.__setattr__(self, "target", target)
        object.__setattr__(self, "args_json", args_json)
        object.__setattr__(self, "args_hash", args_hash)
        object.__setattr__(self, "payload_json", payload_json)
        object.__setattr__(self, "not_before_ms", not_before_ms)
        object.__setattr__(self, "at_ms", at_ms)


@dataclass(frozen=True, slots=True, init=False)
class Grant:
    key: str
    attempt: int
    claim_id: str
    lease_until_ms: int
    at_ms: int

    def __init__(self, key: str, attempt: int, claim_id: str, lease_until_ms: int,
                 at_ms: int) -> None:
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "attempt", attempt)
        object.__setattr__(self, "claim_id", claim_id)
        object.__setattr__(self, "lease_until_ms", lease_until_ms)
        object.__setattr__(self, "at_ms", at_ms)


@dataclass(frozen=True, slots=True, init=False)
class Held:
    key: str
    attempt: int
    claim_id: str
    lease_until_ms: int
    at_ms: int

    def __init__(self, key: str, attempt: int, claim_id: str, lease_until_ms: int,
                 at_ms: int) -> None:
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "attempt", attempt)
        object.__setattr__(self, "claim_id", claim_id)
        object.__setattr__(self, "lease_until_ms", lease_until_ms)
        object.__setattr__(self, "at_ms", at_ms)


@dataclass(frozen=True, slots=True, init=False)
class Reconcile:
    key: str
    attempt: int
    claim_id: str
    target: str
    at_ms: int

    def __init__(self, key: str, attempt: int, claim_id: str, target: str, at_ms: int) -> None:
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "attempt", attempt)
        object.__setattr__(self, "claim_id", claim_id)
        object.__setattr__(self, "target", target)
        object.__setattr__(self, "at_ms", at_ms)


@dataclass(frozen=True, slots=True, init=False)
class Done:
    key: str
    attempt: int
    claim_id: str
    at_ms: int

    def __init__(self, key: str, attempt: int, claim_id: str, at_ms: int) -> None:
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "attempt", attempt)
        object.__setattr__(self, "claim_id", claim_id)
        object.__setattr__(self, "at_ms", at_ms)


@dataclass(frozen=True, slots=True, init=False)
class Receipt:
    receipt_id: str
    key: str
    intent_event_id: str  # the intent this receipt answers (or the reserving one)
    status: ReceiptStatus
    reason: Reason
    args_hash: str
    attempts: int
    at_ms: int
    external_id: str = ""
    detail: str = ""
    # The key's own status after this decision: equal to ``status`` for state changes, and
    # for a rejected or held intent the status of the key it could not touch ("rejected"
    # when no effect holds the key), so the latest receipt of a key always tells its state.
    key_status: ReceiptStatus = ReceiptStatus.ACCEPTED
    # For a receipt that answers an intent: which kind of run asked (the intent's origin).
    origin: str = ""
    # The intent that holds the key: the one whose effect this is ("" when nothing holds
    # the key, and on receipts written before this field).
    effect_intent_id: str = ""

    def __init__(self, receipt_id: str, key: str, intent_event_id: str, status: ReceiptStatus,
                 reason: Reason, args_hash: str, attempts: int, at_ms: int, external_id: str = "",
                 detail: str = "", key_status: ReceiptStatus = ReceiptStatus.ACCEPTED,
                 origin: str = "", effect_intent_id: str = "") -> None:
        object.__setattr__(self, "receipt_id", receipt_id)
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "intent_event_id", intent_event_id)
        object.__setattr__(self, "status", status)
        object.__setattr__(self, "reason", reason)
        object.__setattr__(self, "args_hash", args_hash)
        object.__setattr__(self, "attempts", attempts)
        object.__setattr__(self, "at_ms", at_ms)
        object.__setattr__(self, "external_id", external_id)
        object.__setattr__(self, "detail", detail)
        object.__setattr__(self, "key_status", key_status)
        object.__setattr__(self, "origin", origin)
        object.__setattr__(self, "effect_intent_id", effect_intent_id)

    def with_origin(self, origin: str) -> Receipt:
        """This receipt naming ``origin`` (``dataclasses.replace``, written out field by
        field as ``__init__`` is: each intent's answer gets its origin this way)."""
        return Receipt(
            receipt_id=self.receipt_id,
            key=self.key,
            intent_event_id=self.intent_event_id,
            status=self.status,
            reason=self.reason,
            args_hash=self.args_hash,
            attempts=self.attempts,
            at_ms=self.at_ms,
            external_id=self.external_id,
            detail=self.detail,
            key_status=self.key_status,
            origin=origin,
            effect_intent_id=self.effect_intent_id,
        )

    @property
    def state(self) -> ReceiptStatus:
        """The key's state: what the operation is, whoever asked (``key_status``)."""
        return self.key_status

    @property
    def answer(self) -> Answer:
        """What the intent this receipt answers got (``answer_to``)."""
        return self.answer_to(self.intent_event_id)

    def answer_to(self, intent_event_id: str) -> Answer:
        """What the intent ``intent_event_id`` got, read from this receipt: by its own
        status when the receipt answers it, else by the key's (a later change of the key).
        A settled key is ``created`` for the intent that holds it, ``already_done`` for
        any other; a receipt without ``effect_intent_id`` (written before it) names no
        holder, so it reads ``already_done``: never a second ``created``."""
        status = self.status if intent_event_id == self.intent_event_id else self.key_status
        if status is ReceiptStatus.REJECTED:
            return Answer.REJECTED
        if status is ReceiptStatus.HELD:
            return Answer.HELD
        if status not in (ReceiptStatus.SUCCEEDED, ReceiptStatus.FAILED):
            return Answer.PENDING
        if self.effect_intent_id and self.effect_intent_id == intent_event_id:
            return Answer.CREATED
        return Answer.ALREADY_DONE


@dataclass(frozen=True, slots=True, init=False)
class Alert:
    alert_id: str
    key: str
    kind: AlertKind
    source_event_id: str
    detail: str
    at_ms: int

    def __init__(self, alert_id: str, key: str, kind: AlertKind, source_event_id: str, detail: str,
                 at_ms: int) -> None:
        object.__setattr__(self, "alert_id", alert_id)
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "source_event_id", source_event_id)
        object.__setattr__(self, "detail", detail)
        object.__setattr__(self, "at_ms", at_ms)


@dataclass(frozen=True, slots=True, init=False)
class DeadLetter:
    topic: str
    partition: int
    offset: int
    reason: str
    at_ms: int
    key: bytes | None = None
    value: bytes | None = None

    def __init__(self, topic: str, partition: int, offset: int, reason: str, at_ms: int,
                 key: bytes | None = None, value: bytes | None = None) -> None:
        object.__setattr__(self, "topic", topic)
        object.__setattr__(self, "partition", partition)
        object.__setattr__(self, "offset", offset)
        object.__setattr__(self, "reason", reason)
        object.__setattr__(self, "at_ms", at_ms)
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "value", value)


DispatchMessage = Dispatch | Grant | Held | Reconcile | Done
OutputEvent = DispatchMessage | Receipt | Alert | DeadLetter

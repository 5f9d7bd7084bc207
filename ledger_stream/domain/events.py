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

The enumerations are in ``kinds``, the output events in ``output_events``; this module
names them all, so every reader imports the events from here.
"""

from __future__ import annotations

from dataclasses import dataclass

from ledger_stream.domain.kinds import (
    TERMINAL_RECEIPTS,
    AlertKind,
    Answer,
    AuditAction,
    FreezeMode,
    Origin,
    OutcomeStatus,
    Reason,
    ReceiptStatus,
    ReconcileStatus,
    Resolution,
)
from ledger_stream.domain.output_events import (
    Alert,
    DeadLetter,
    Dispatch,
    DispatchMessage,
    Done,
    Grant,
    Held,
    OutputEvent,
    Receipt,
    Reconcile,
)

__all__ = [  # the inputs defined here, the kinds and outputs named here for every reader
    "Approval", "Workflow", "Observation", "Intent", "AttemptClaim", "AttemptOutcome",
    "ReconcileResult", "OperatorResolution", "PoisonInput", "Timer", "Tick", "Containment",
    "AuditRecord", "Release", "AttemptEvent", "InputEvent", "Origin", "OutcomeStatus",
    "ReconcileStatus", "Resolution", "ReceiptStatus", "TERMINAL_RECEIPTS", "Answer", "Reason",
    "AlertKind", "FreezeMode", "AuditAction", "Dispatch", "Grant", "Held", "Reconcile", "Done",
    "Receipt", "Alert", "DeadLetter", "DispatchMessage", "OutputEvent",
]


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
    # The claimant committed a pre-granted dispatch's offset in its group generation and
    # calls under the dispatch's lease without waiting for the answer.
    fenced: bool = False

    def __init__(self, event_id: str, key: str, attempt: int, claim_id: str, connector: str,
                 lease_ms: int, at_ms: int, fenced: bool = False) -> None:
        object.__setattr__(self, "event_id", event_id)
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "attempt", attempt)
        object.__setattr__(self, "claim_id", claim_id)
        object.__setattr__(self, "connector", connector)
        object.__setattr__(self, "lease_ms", lease_ms)
        object.__setattr__(self, "at_ms", at_ms)
        object.__setattr__(self, "fenced", fenced)


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

"""The gateway's request and response bodies: its OpenAPI schema. Answers carry ids, hashes and
statuses, never the arguments."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ledger_stream.domain import events as ev
from ledger_stream.domain.effects import EXTERNAL_ID_LIMIT
from ledger_stream.history.detail import shown_detail

SETTLED = frozenset({ev.ReceiptStatus.SUCCEEDED, ev.ReceiptStatus.FAILED,
                     ev.ReceiptStatus.REJECTED})


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class OperatorCommand(Strict):
    """A body of an operator route: who acts is the API key's holder, never a field."""

    @model_validator(mode="before")
    @classmethod
    def _no_operator_field(cls, data: Any) -> Any:
        if isinstance(data, dict) and ({"operator", "by"} & set(data)):
            raise ValueError("the operator is the holder of the API key "
                             "(TENANT:operator:NAME=KEY): leave 'operator' out")
        return data


class WorkflowIn(Strict):
    graph: str = Field(min_length=1, description="the agent graph or workflow name")
    version: str = Field(min_length=1, description="its version (compatibility is by major)")
    thread_id: str = ""
    node: str = ""
    checkpoint_id: str = Field("", description="the checkpoint behind the step: a fork's, "
                               "the one replayed, or the one the step ran from")


class ApprovalIn(Strict):
    approval_id: str
    payload_hash: str
    policy_revision: str
    expires_at_ms: int = Field(ge=0, le=2**63 - 1)
    signature: str
    key_id: str = Field("", description="the approver key that signed (as `ledger-stream "
                        "approve` and POST /v1/approvals give it)")


class IntentIn(Strict):
    key: str = Field(description="operation key, tenant/action/business-id; its tenant must be "
                     "the API key's")
    action: str = Field(description="the key's action")
    target: str = Field(description="the connector target that applies the effect")
    args: dict[str, Any] = Field(description="the material arguments (hashed; a repeat with "
                                 "other arguments is rejected as a conflict)")
    payload: Any = Field(None, description="content the connector needs that is not material")
    workflow: WorkflowIn
    approval: ApprovalIn | None = None
    policy_revision: str = ""
    origin: Literal["fresh", "resume", "replay", "fork", "operator"] = "fresh"
    wait_seconds: float = Field(0.0, ge=0, le=120, description="how long to wait for the "
                                "ledger's answer (0: answer 202 at once)")


class Operation(BaseModel):
    """An operation's key state first, then what one request got (docs/operations.md)."""

    key: str
    state: str | None = Field(None, description="the key's state, whoever asked: accepted, "
                              "in_progress, reconciling, succeeded, failed, rejected (nothing "
                              "holds the key), held, needs_reconciliation")
    answer: Literal["created", "already_done", "rejected", "held", "pending"] | None = Field(
        None, description="what the request got: the submitted intent on a submit, the "
        "latest intent the ledger answered (intent_event_id) on a read. created: its effect "
        "(state says succeeded or failed); already_done: an earlier intent's effect, the "
        "original outcome; rejected: refused, see reason; held: see reason; pending: no "
        "outcome yet")
    found: bool = Field(description="false: no receipt yet")
    resolved: bool = Field(description="true once the outcome is settled; hold dependent "
                           "work while false")
    status: str | None = Field(None, description="on a submit, the status of the answer to "
                               "the submitted intent; on a read, the key's state (as state)")
    key_status: str | None = Field(None, description="the operation's own status (as state)")
    reason: str | None = Field(None, description="why the answer: conflict, approval, "
                               "expired_key, version, frozen, ...; none when nothing needs "
                               "explaining")
    external_id: str | None = Field(None, description="the target's id for the effect")
    attempts: int | None = None
    intent_event_id: str | None = Field(None, description="the intent this answer is for")
    effect_intent_id: str | None = Field(None, description="the intent whose effect the key "
                                         "holds (null when none does)")
    receipt_id: str | None = None
    detail: str | None = None
    at_ms: int | None = None
    origin: str | None = Field(None, description="for an answer to an intent: which kind of "
                               "run asked (fresh, resume, replay, fork, operator)")

    @classmethod
    def of(cls, key: str, receipt: ev.Receipt | None, own: str | None = None) -> Operation:
        """``own``: the event id of the intent this request submitted; a receipt answering
        it is settled by its own status, any other by the key's. Without ``own`` (a read)
        ``status`` is the key's state: the latest receipt may answer another caller's
        refused intent, and that is its ``answer``, never the key's state."""
        if receipt is None:
            return cls(key=key, found=False, resolved=False, intent_event_id=own,
                       answer=ev.Answer.PENDING.value if own is not None else None)
        mine = own is not None and receipt.intent_event_id == own
        state = receipt.key_status
        return cls(key=key, state=state.value,
                   answer=receipt.answer_to(own or receipt.intent_event_id).value,
                   found=True, resolved=(receipt.status if mine else state) in SETTLED,
                   status=(receipt.status if own is not None else state).value,
                   key_status=state.value,
                   reason=receipt.reason.value, external_id=receipt.external_id or None,
                   attempts=receipt.attempts, intent_event_id=own or receipt.intent_event_id,
                   effect_intent_id=receipt.effect_intent_id or None,
                   receipt_id=receipt.receipt_id, detail=shown_detail(receipt.detail) or None,
                   at_ms=receipt.at_ms, origin=receipt.origin or None)


class Submitted(BaseModel):
    intent_event_id: str
    args_hash: str
    answered: bool = Field(description="false: no answer within wait_seconds; ask "
                           "GET /v1/operations/{key} (or submit again: it is safe)")
    operation: Operation


class KeyHolder(BaseModel):
    tenant: str
    operator: str = Field(description="the operator's name; empty for an agent's key")
    key_id: str = Field(description="names the key without revealing it")


class AlertOut(BaseModel):
    alert_id: str
    key: str
    kind: str
    detail: str
    source_event_id: str
    at_ms: int
    partition: int
    offset: int


class ResolutionIn(OperatorCommand):
    resolution: Literal["applied", "not_applied", "failed"]
    attempt: int = Field(ge=1, description="the attempt the operator looked at: refused "
                         "(409) if the key has moved on since")
    reason: str = Field(min_length=1, max_length=500,
                        description="why: what the operator checked")
    external_id: str = Field("", max_length=EXTERNAL_ID_LIMIT,
                             description="the target's id, required with applied (no card "
                             "number: 409)")
    decision_id: str | None = Field(
        None, min_length=8, max_length=128, pattern=r"^[A-Za-z0-9._:-]+$",
        description="id of this decision (letters, digits, '.', '_', ':', '-'): the same "
        "decision again is a no-op (default: new)")

    @model_validator(mode="after")
    def _applied_names_the_effect(self) -> ResolutionIn:
        if self.resolution == "applied" and not self.external_id:
            raise ValueError("applied needs external_id: the target's id for the effect")
        return self


class ResolutionOut(BaseModel):
    key: str
    attempt: int
    resolution: str
    decision_id: str
    operator: str = Field(description="who decided: the API key's holder")
    replayed: bool = Field(description="true: this decision was already recorded")
    verdict: Literal["applied", "pending", "unknown"] = Field(
        description="applied: the ledger's receipt names this decision (status 200); "
        "pending: none named a decision within the wait (202); unknown: a retried decision "
        "whose key has moved on and whose receipt was compacted away (202). A decision "
        "another one beat is a 409.")
    receipt: dict[str, Any] | None = Field(
        None, description="the receipt naming this decision, when applied")


class FreezeIn(OperatorCommand):
    """A freeze of one action for the API key's tenant (operate/containment.py), by the
    operator the API key names."""

    action: str = Field(min_length=1, description="the action to freeze, e.g. refund")
    reason: str = Field(min_length=1, max_length=500, description="why (in the audit trail; "
                        "no payment details)")
    mode: Literal["hold", "approval"] = Field("hold", description="hold: hold every new "
                                              "dispatch; approval: new intents need approval")


class FreezeOut(BaseModel):
    scope: str = Field(description="tenant/action, or */action for every tenant")
    action: str
    tenant: str = Field(description="empty: every tenant")
    frozen: bool = Field(description="false: this record is an unfreeze")
    mode: str
    reason: str
    operator: str
    event_id: str
    at_ms: int = Field(description="when the log recorded it (broker time)")
    in_force: bool | None = Field(None, description="for a freeze or unfreeze just made: "
                                  "every partition's processor has applied it (an intent "
                                  "sent now is decided under it; a retry with an "
                                  "Idempotency-Key they applied before is ignored: GET "
                                  "/v1/freezes shows what is in force); false: see "
                                  "not_applied")
    not_applied: list[int] = Field(default_factory=list, description="the partitions whose "
                                   "processor had not applied it when the answer was sent")

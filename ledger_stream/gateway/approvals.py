"""The gateway's approval routes: the tenant's intents waiting for an approval, and an
operator's approval, signed with the approver key configured on the gateway
(LEDGER_APPROVAL_SIGNING_KEY).

Only an operator's API key approves (an agent's key is refused, 403, so an agent cannot
approve its own payment), and only its own tenant's keys. Without a signing key the
gateway lists what waits but approves nothing (503 naming the setting). Answers carry keys,
hashes and ids, never the arguments.
"""

# No ``from __future__ import annotations``: FastAPI reads the routes' annotations, defined
# inside ``router``, when they are declared.
import logging
from typing import TypeVar

from fastapi import APIRouter, HTTPException
from pydantic import BaseModel, Field

from ledger_stream.domain import events as ev
from ledger_stream.domain.approval import ApprovalSigner
from ledger_stream.domain.keys import KEY_LIMIT
from ledger_stream.gateway.callers import Operator, Tenant, actor_of, off_loop, own
from ledger_stream.gateway.models import ApprovalIn, Strict
from ledger_stream.gateway.refusals import NOT_OPERATOR, OPERATOR_KEY, refusals
from ledger_stream.gateway.scans import Scans
from ledger_stream.kafka.reader import tail_topic
from ledger_stream.logs import log_fields
from ledger_stream.operate.approvals import approval_json, approve, load_signer
from ledger_stream.operate.audit import AuditNotWritten, approval_detail, record_approval
from ledger_stream.sdk.client import LedgerClient
from ledger_stream.serde import DecodeError

logger = logging.getLogger(__name__)
T = TypeVar("T")
MISSING = "approval missing"  # the receipt detail of an intent that came without one


class PendingApproval(BaseModel):
    key: str
    action: str
    target: str
    args_hash: str = Field(description="the hash an approval must name (payload_hash)")
    policy_revision: str = Field(description="the revision an approval must name, if any")
    intent_event_id: str
    at_ms: int = Field(description="when the ledger rejected the intent for want of approval")


class ApproveIn(Strict):
    key: str = Field(max_length=KEY_LIMIT,
                     description="the operation key; its tenant must be the API key's")
    args_hash: str = Field(pattern=r"^[0-9a-f]{64}$",
                           description="the arguments approved, as the pending intent's hash")
    expires_in_s: float = Field(600.0, gt=0, le=7 * 86_400,
                                description="seconds the approval is valid (default 600)")
    policy_revision: str = Field("", max_length=200)


def router(client: LedgerClient, scans: Scans) -> APIRouter:
    """The routes, authenticated as the app's other routes are (its Tenant and Operator
    dependencies), the list read on the app's ``scans``. InvalidApprovalKey when the
    configured signing key cannot be loaded."""

    signer = load_signer(client.settings.policy.signing_key) \
        if client.settings.policy.signing_key is not None else None
    routes = APIRouter()

    @routes.get("/v1/approvals", response_model=list[PendingApproval], tags=["approvals"],
                responses=refusals(401, 503))
    async def pending(who: Tenant) -> list[PendingApproval]:
        """The tenant's keys whose latest intent was rejected for a missing approval and
        that hold no effect, oldest first. Reads the receipts and intents topics to their
        end: for an operator's look, not a hot path."""
        return await scans.run(who, "approvals", pending_approvals, client, who)

    @routes.post("/v1/approvals", response_model=ApprovalIn, status_code=201,
                 tags=["approvals"], openapi_extra=OPERATOR_KEY, responses=refusals(
                     400, 401, 403, 422, 503, s403=NOT_OPERATOR, s400="a malformed "
                     "operation key, an operator named in the query, or a line break in "
                     "the policy revision", s503="this gateway has no approver key "
                     "(LEDGER_APPROVAL_SIGNING_KEY), or the audit record cannot be "
                     "written: no approval is handed out"))
    async def issue(body: ApproveIn, who: Operator) -> ApprovalIn:
        """Sign an approval of ``args_hash`` for ``key`` with the gateway's approver key:
        the answer is the ``approval`` the agent attaches to its intent. Its audit record
        (who: the operator key's holder) is written first: 503, and no approval, when it
        cannot be."""
        own(who.tenant, body.key)
        if signer is None:
            raise HTTPException(503, "this gateway has no approver key: set "
                                "LEDGER_APPROVAL_SIGNING_KEY to approve here, or use "
                                "`ledger-stream approve`")
        try:
            approval = approve(signer, body.key, body.args_hash,
                               expires_in_s=body.expires_in_s,
                               policy_revision=body.policy_revision)
        except ValueError as exc:  # a line break in the policy revision
            raise HTTPException(400, str(exc)) from None
        try:
            await off_loop(record_approval, client.settings, client.bootstrap, client.codec,
                           actor_of(who), body.key, approval.approval_id,
                           approval_detail(approval, signer.key_id))
        except AuditNotWritten as exc:
            raise HTTPException(503, str(exc)) from None
        record_issued_approval(who.tenant, body.key, approval, signer)
        return ApprovalIn(**approval_json(approval))

    return routes


def record_issued_approval(tenant: str, key: str, approval: ev.Approval,
                           signer: ApprovalSigner) -> None:
    """Where every approval the gateway issues is recorded: who (the tenant's operator key),
    which key and arguments, which approver key, until when."""
    logger.info("approval issued", extra=log_fields(
        tenant=tenant, key=key, approval_id=approval.approval_id,
        args_hash=approval.payload_hash, approver_key_id=signer.key_id,
        expires_at_ms=approval.expires_at_ms))


def pending_approvals(client: LedgerClient, tenant: str) -> list[PendingApproval]:
    """The tenant's intents waiting for an approval (see ``pending``), oldest first."""
    latest: dict[str, ev.Receipt] = {}
    for receipt in _events(client, "receipts", ev.Receipt):
        if receipt.key.startswith(f"{tenant}/"):
            latest[receipt.key] = receipt
    waiting: dict[str, ev.Receipt] = {
        r.intent_event_id: r for r in latest.values() if _waits_for_approval(r)}
    if not waiting:
        return []
    found = []
    for intent in _events(client, "intents", ev.Intent):
        answer = waiting.pop(intent.event_id, None)
        if answer is not None and intent.key == answer.key:
            found.append(PendingApproval(
                key=intent.key, action=intent.action, target=intent.target,
                args_hash=intent.args_hash, policy_revision=intent.policy_revision,
                intent_event_id=intent.event_id, at_ms=answer.at_ms))
    return sorted(found, key=lambda p: p.at_ms)


def _waits_for_approval(receipt: ev.Receipt) -> bool:
    return (receipt.status is ev.ReceiptStatus.REJECTED and receipt.reason is ev.Reason.APPROVAL
            and receipt.key_status is ev.ReceiptStatus.REJECTED and receipt.detail == MISSING)


def _events(client: LedgerClient, role: str, kind: type[T]) -> list[T]:
    """Every record of a ledger topic of type ``kind``; one that does not decode is
    skipped."""
    found = []
    for _, _, value in tail_topic(client.bootstrap, client.settings.topic(role), follow=False):
        try:
            event = client.codec.decode(value) if value is not None else None
        except DecodeError:
            continue
        if isinstance(event, kind):
            found.append(event)
    return found

"""The gateway's routes (FastAPI; OpenAPI at ``/openapi.json``, docs at ``/docs``).

Every route but ``/healthz``, ``/metrics`` and the console (its files) needs ``Authorization:
Bearer <API key>``; the key acts for one tenant and a request about another tenant's key is
refused (403) before anything is read or written; lists (alerts, the reconciliation queue,
freezes) hold only the key's tenant's. Lookups in the view send the caller's key.
Waiting for a receipt is native to the event loop (``AsyncLedgerClient``): a waiting
request holds no worker thread. Reads of a key's partition or a whole topic run in
the thread pool.
"""

from __future__ import annotations

import functools
import logging
import uuid
from pathlib import Path
from typing import Annotated, Any

from confluent_kafka import KafkaException
from fastapi import FastAPI, Header, HTTPException, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse
from fastapi.routing import iter_route_contexts
from fastapi.staticfiles import StaticFiles

from ledger_stream.domain import events as ev
from ledger_stream.gateway import reads
from ledger_stream.gateway.auth import ApiKeys, Holder
from ledger_stream.gateway.body_limit import BodyLimit
from ledger_stream.gateway.callers import Operator, Tenant, actor_of, off_loop, own
from ledger_stream.gateway.docs import add_offline_docs
from ledger_stream.gateway.groups import NAMES, openapi_tags
from ledger_stream.gateway.metrics import add_metrics
from ledger_stream.gateway.models import (
    AlertOut,
    FreezeIn,
    FreezeOut,
    IntentIn,
    KeyHolder,
    Operation,
    ResolutionIn,
    ResolutionOut,
    Submitted,
)
from ledger_stream.gateway.refusals import (
    FREEZE_COMMANDS,
    KEY_READS,
    NOT_OPERATOR,
    OPERATOR_KEY,
    PUBLIC,
    refusals,
)
from ledger_stream.gateway.scans import Scans
from ledger_stream.kafka.exceptions import KafkaSetupError, kafka_error_text
from ledger_stream.logs import log_fields
from ledger_stream.operate import (
    AuditNotWritten,
    DecisionRefused,
    containment,
    record_decision,
)
from ledger_stream.sdk.client import AsyncLedgerClient
from ledger_stream.sdk.errors import (
    InvalidIntentError,
    LedgerUnavailable,
    StaleStatusError,
    StaleTimelineError,
    ViewUnavailableError,
)
from ledger_stream.serde import SerdeError
from ledger_stream.serde.exceptions import SchemaRegistryUnavailable
from ledger_stream.serde.records import to_record

# Seconds a freeze or unfreeze waits for every partition's processor to apply it.
Wait = Annotated[float, Query(ge=0, le=30)]
# A freeze or unfreeze request's id, chosen by the client so that it can retry safely.
IdempotencyKey = Annotated[str | None, Header(alias="Idempotency-Key", min_length=1,
                                              max_length=200, pattern=r"^[\x21-\x7e]+$")]
STATIC = Path(__file__).with_name("static")
CONSOLE = STATIC / "console.html"
KINDS = tuple(k.value for k in ev.AlertKind)
logger = logging.getLogger("ledger_stream.gateway")


def build_app(client: AsyncLedgerClient, keys: ApiKeys) -> FastAPI:
    app = FastAPI(title="ledger-stream", version="1",
                  description="Effectively-once side effects for AI agents, over HTTP.",
                  docs_url=None, redoc_url=None,  # add_offline_docs: no CDN
                  openapi_tags=openapi_tags())
    add_offline_docs(app)
    app.state.keys = keys
    sync = client.client
    app.add_middleware(BodyLimit)  # ahead of routing: before any body is read or parsed
    scans = Scans()  # the list routes' whole-topic reads (gateway/scans.py)
    add_metrics(app, sync.settings)

    @app.exception_handler(LedgerUnavailable)
    @app.exception_handler(KafkaSetupError)
    @app.exception_handler(KafkaException)
    async def unavailable(request: Request, exc: Exception) -> JSONResponse:
        return JSONResponse({"detail": _unreachable("the ledger", exc)}, 503)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        """422 naming each field and what is wrong with it, never echoing the value: it may
        be a payment detail, or NaN, which JSON cannot carry back (FastAPI's own handler
        echoed the input, and answered 500 for a NaN)."""
        return JSONResponse({"detail": [
            {"loc": list(error.get("loc", ())), "msg": str(error.get("msg", "")),
             "type": str(error.get("type", ""))} for error in exc.errors()]}, 422)

    @app.get("/console", include_in_schema=False)
    async def console() -> HTMLResponse:
        """The operator console: a page that calls the routes below with the operator's
        API key (kept in the browser tab's session storage)."""
        return HTMLResponse(CONSOLE.read_text(encoding="utf-8"))

    # The console's script and styles, from the package: the page loads nothing from
    # another host.
    app.mount("/console/assets", StaticFiles(directory=STATIC), name="console-assets")

    @app.get("/v1/whoami", response_model=KeyHolder, tags=["keys"],
             responses=refusals(401))
    async def whoami(request: Request, who: Tenant,
                     authorization: Annotated[str | None, Header()] = None) -> KeyHolder:
        """Who the request's API key acts for: its tenant, and the operator's name for an
        operator's key (empty for an agent's). The console asks first, to say which key
        is in use and offer operator actions only to an operator."""
        keys: ApiKeys = request.app.state.keys
        holder = keys.holder_of((authorization or "").partition(" ")[2].strip())
        return KeyHolder(tenant=who, operator=holder.operator if holder else "",
                         key_id=holder.key_id if holder else "")

    @app.get("/healthz", tags=["service"], openapi_extra=PUBLIC)
    async def healthz() -> dict[str, str]:
        """``{"status": "ok"}`` while the gateway serves (it reads nothing from Kafka)."""
        return {"status": "ok"}

    @app.post("/v1/intents", response_model=Submitted, tags=["intents"], responses={
        202: {"model": Submitted, "description": "recorded, not answered within the wait"},
        **refusals(400, 401, 403, 422, 503, s400="an intent the ledger cannot take: the "
                   "detail says why (a malformed key, an action other than the key's, too "
                   "large)", s503="Kafka or the schema registry cannot be reached: retry "
                   "(the same intent is safe to send again)")})
    async def submit(body: IntentIn, who: Tenant) -> Any:
        own(who, body.key)
        unencodable = _not_utf8(body)
        if unencodable:  # said here: the encoder's error would not say which field
            raise HTTPException(400, f"the intent's {unencodable} is not valid UTF-8 text "
                                "(it holds a lone surrogate)")
        try:
            intent = client.intent(
                body.key, body.action, body.target, body.args,
                workflow=ev.Workflow(**body.workflow.model_dump()), payload=body.payload,
                approval=ev.Approval(**body.approval.model_dump()) if body.approval else None,
                policy_revision=body.policy_revision, origin=ev.Origin(body.origin))
        except (InvalidIntentError, TypeError, ValueError) as exc:
            raise HTTPException(400, str(exc)) from None
        try:
            receipt = await client.submit(intent, body.wait_seconds, raise_errors=False)
        except SchemaRegistryUnavailable as exc:  # the registry, not the intent: retry later
            raise HTTPException(503, _unreachable("the schema registry", exc)) from None
        except InvalidIntentError as exc:  # e.g. larger than Kafka accepts
            raise HTTPException(400, str(exc)) from None
        except SerdeError:
            raise HTTPException(400, "the intent cannot be encoded (a number out of the "
                                "64-bit range?)") from None
        except TimeoutError:
            answer = Submitted(intent_event_id=intent.event_id, args_hash=intent.args_hash,
                               answered=False,
                               operation=Operation.of(body.key, None, own=intent.event_id))
            return JSONResponse(answer.model_dump(), 202)
        return Submitted(intent_event_id=intent.event_id, args_hash=intent.args_hash,
                         answered=True, operation=Operation.of(body.key, receipt,
                                                               own=intent.event_id))

    @app.get("/v1/timeline/{key:path}", tags=["operations"], responses=KEY_READS)
    async def key_timeline(key: str, who: Tenant) -> list[dict[str, Any]]:
        """One row per record of the key in every ledger topic: from the view's timeline
        when the gateway has a view (LEDGER_VIEW_URL), caught up to what was committed when
        the request came; else from the key's partition of each topic."""
        own(who, key)
        try:
            rows = await off_loop(sync.timeline, key)
        except StaleTimelineError as exc:
            raise HTTPException(503, str(exc)) from None
        except ViewUnavailableError as exc:
            raise HTTPException(503, _unreachable("the view", exc)) from None
        if not rows:
            raise HTTPException(404, f"no record of {key} in the ledger")
        return [row.as_dict() for row in rows]

    @app.get("/v1/evidence/{key:path}", tags=["operations"], responses=KEY_READS)
    async def key_evidence(key: str, who: Tenant) -> dict[str, Any]:
        """Everything known about the key as one redacted document (as ``ledger-stream
        inspect --evidence``): from the view's timeline when the gateway has a view, else
        from the key's partition of each topic."""
        own(who, key)
        try:
            found = await off_loop(sync.evidence, key)
        except StaleTimelineError as exc:
            raise HTTPException(503, str(exc)) from None
        except ViewUnavailableError as exc:
            raise HTTPException(503, _unreachable("the view", exc)) from None
        if found is None:
            raise HTTPException(404, f"no record of {key} in the ledger")
        return found

    @app.get("/v1/operations/{key:path}", response_model=Operation, tags=["operations"],
             responses=KEY_READS)
    async def operation(key: str, who: Tenant) -> Operation:
        own(who, key)
        try:
            receipt = await client.status(key)
        except StaleStatusError as exc:
            raise HTTPException(503, str(exc)) from None
        except ViewUnavailableError as exc:
            raise HTTPException(503, _unreachable("the view", exc)) from None
        if receipt is None:
            raise HTTPException(404, f"no receipt for {key}")
        return Operation.of(key, receipt)

    @app.get("/v1/alerts", response_model=list[AlertOut], tags=["alerts"],
             responses=refusals(400, 401, 422, 503, s400="an unknown alert kind"))
    async def alerts(who: Tenant, kind: Annotated[list[str] | None, Query()] = None,
                     limit: Annotated[int, Query(ge=1, le=10_000)] = 100) -> list[AlertOut]:
        unknown = sorted(set(kind or ()) - set(KINDS))
        if unknown:
            raise HTTPException(400, f"unknown alert kind(s) {', '.join(unknown)}; "
                                f"known: {', '.join(KINDS)}")
        kinds = frozenset(kind or ())
        return await scans.run(who, ("alerts", kinds, limit), reads.alerts, sync, who, kinds,
                               limit)

    @app.get("/v1/reconciliation", response_model=list[Operation], tags=["reconciliation"],
             responses=refusals(401, 503))
    async def reconciliation(who: Tenant) -> list[Operation]:
        waiting = await scans.run(who, "reconciliation", reads.waiting, sync, who)
        return [Operation.of(r.key, r) for r in waiting]

    @app.post("/v1/reconciliation/{key:path}", response_model=ResolutionOut,
              tags=["reconciliation"], openapi_extra=OPERATOR_KEY, responses={
        202: {"model": ResolutionOut, "description": "recorded, not applied within the wait"},
        **refusals(400, 401, 403, 409, 422, 503, s403=NOT_OPERATOR, s400="a malformed "
                   "operation key, or an operator named in the query", s409="refused: "
                   "the key is not waiting for an operator or moved on, the id was used "
                   "with other contents, or another decision took effect first",
                   s503="the audit record cannot be written (the decision is not sent), "
                   "or Kafka cannot be reached: retry with the same decision_id")})
    async def resolve(key: str, body: ResolutionIn, who: Operator, wait: Wait = 10.0) -> Any:
        """Record a decision by the operator the API key names (audited first), then wait
        (up to ``wait`` seconds) for the ledger's receipt naming the decision that took
        effect: 200 when it is this one, 409 when another decision was applied first, 202
        when none was within the wait; 503 when the audit record cannot be written (the
        decision is then not sent)."""
        own(who.tenant, key)
        decision_id = body.decision_id or uuid.uuid4().hex
        try:
            done = await off_loop(functools.partial(
                record_decision, sync.settings, sync.bootstrap, sync.codec, key=key,
                attempt=body.attempt, resolution=ev.Resolution(body.resolution),
                actor=actor_of(who), reason=body.reason, decision_id=decision_id,
                external_id=body.external_id, wait_s=wait))
        except DecisionRefused as exc:
            raise HTTPException(409, str(exc)) from None
        except AuditNotWritten as exc:
            raise HTTPException(503, str(exc)) from None
        answer = ResolutionOut(
            key=key, attempt=done.decision.attempt, resolution=done.decision.resolution.value,
            decision_id=done.decision.event_id, operator=done.decision.operator,
            replayed=done.replayed, verdict=done.verdict,
            receipt=to_record(done.receipt) if done.receipt is not None else None)
        if done.verdict == "applied":
            return answer
        return JSONResponse(answer.model_dump(), 202)

    @app.get("/v1/freezes", response_model=list[FreezeOut], tags=["freezes"],
             responses=refusals(401, 503))
    async def freezes(who: Tenant) -> list[FreezeOut]:
        """The freezes in force over this tenant's keys: its own and those of every
        tenant."""
        records = await scans.run(who, "freezes", containment.log, sync.settings,
                                  sync.bootstrap, sync.codec)
        return [_freeze_out(r) for r in containment.active(records)
                if r.event.tenant in ("", who)]

    @app.post("/v1/freezes", response_model=FreezeOut, status_code=201, tags=["freezes"],
              openapi_extra=OPERATOR_KEY, responses=FREEZE_COMMANDS)
    async def freeze(body: FreezeIn, who: Operator, wait: Wait = 10.0,
                     idempotency_key: IdempotencyKey = None) -> FreezeOut:
        """Freeze an action for this tenant (a freeze of every tenant is the CLI's).
        Answers once every partition's processor has applied it, or after ``wait``
        seconds (``in_force`` false, ``not_applied`` naming the partitions; null when that
        could not be read). With an ``Idempotency-Key`` (the event id is
        ``gw:<tenant>:<key>``), a retry of this request that the processors
        applied already changes nothing, even after another freeze or unfreeze (a 503
        names the key to retry with when the request had none)."""
        return await _contain(who, body.action, True, ev.FreezeMode(body.mode), body.reason,
                              wait, idempotency_key or "")

    @app.delete("/v1/freezes/{action}", response_model=FreezeOut, tags=["freezes"],
                openapi_extra=OPERATOR_KEY, responses=FREEZE_COMMANDS)
    async def unfreeze(action: str, who: Operator, wait: Wait = 10.0,
                       idempotency_key: IdempotencyKey = None) -> FreezeOut:
        """Unfreeze this tenant's freeze of an action, by the operator the API key names:
        its held dispatches are released (answered as the freeze is). ``Idempotency-Key``
        as for the freeze: a retried unfreeze cannot lift a freeze made after its first
        try."""
        return await _contain(who, action, False, ev.FreezeMode.HOLD, "", wait,
                              idempotency_key or "")

    async def _contain(who: Holder, action: str, frozen: bool, mode: ev.FreezeMode,
                       reason: str, wait: float, client_key: str) -> FreezeOut:
        # A client's key is its own: namespaced by tenant, so that one tenant's key never
        # meets another's command. Without one, the answer to a failure still names a key
        # to retry with.
        key = client_key or uuid.uuid4().hex
        tenant = who.tenant
        try:
            event, offsets = await off_loop(functools.partial(
                containment.send, sync.settings, sync.bootstrap, sync.codec, action=action,
                tenant=tenant, frozen=frozen, mode=mode, reason=reason, actor=actor_of(who),
                event_id=f"gw:{tenant}:{key}"))
        except containment.ContainmentRefused as exc:
            raise HTTPException(400, str(exc)) from None
        except AuditNotWritten as exc:
            raise HTTPException(503, f"{exc}; retry with the header Idempotency-Key: {key}",
                                headers={"Idempotency-Key": key}) from None
        except (KafkaSetupError, KafkaException) as exc:
            raise HTTPException(503, f"{_unreachable('the ledger', exc)}; retry with the "
                                f"header Idempotency-Key: {key}",
                                headers={"Idempotency-Key": key}) from None
        out = _freeze_out(containment.FreezeRecord(event, -1, event.at_ms))
        try:
            late = await off_loop(containment.not_applied, sync.settings, sync.bootstrap,
                                  offsets, wait) if wait > 0 else sorted(offsets)
        except (KafkaSetupError, KafkaException):  # recorded: never answered as a failure
            return out.model_copy(update={"in_force": None, "not_applied": sorted(offsets)})
        return out.model_copy(update={"in_force": not late, "not_applied": late})

    from ledger_stream.gateway import approvals  # its routes use this module's dependencies

    app.include_router(approvals.router(sync, scans))
    _every_route_in_a_group(app)
    return app


def _unreachable(what: str, exc: Exception) -> str:
    """The answer to a caller when ``what`` cannot be reached: a fixed text. What went wrong
    (it names the Kafka bootstrap or the registry's address) is logged here, never told to
    a tenant's caller."""
    text = kafka_error_text(exc) if isinstance(exc, KafkaException) else str(exc)
    logger.warning(f"{what} cannot be reached", extra=log_fields(error=text))
    return f"{what} cannot be reached"


def _not_utf8(body: IntentIn) -> str | None:
    """The first field of ``body`` holding text that UTF-8 cannot carry (a lone surrogate,
    which JSON's ``\\ud800`` writes), in a value or an object's name at any depth; None when
    there is none. The key is checked as a key (``operation_key``)."""
    for field, value in body.model_dump(exclude={"key"}).items():
        stack = [value]
        while stack:  # no recursion: a body may nest as deep as its parser allows
            item = stack.pop()
            if isinstance(item, dict):
                stack.extend(item.keys())
                stack.extend(item.values())
            elif isinstance(item, list | tuple):
                stack.extend(item)
            elif isinstance(item, str) and not item.isascii():
                try:
                    item.encode("utf-8")
                except UnicodeEncodeError:
                    return str(field)
    return None


def _every_route_in_a_group(app: FastAPI) -> None:
    """Every documented route is in one of the groups ``api --help`` names."""
    for route in iter_route_contexts(app.routes):  # the included routers' routes too
        tags = set(getattr(route, "tags", None) or ())
        if getattr(route, "include_in_schema", False) and (len(tags) != 1 or tags - NAMES):
            raise AssertionError(f"route {getattr(route, 'path', route)} has tags "
                                 f"{sorted(tags)}: give it one of gateway/groups.py")


def _freeze_out(record: containment.FreezeRecord) -> FreezeOut:
    e = record.event
    return FreezeOut(scope=record.scope, action=e.action, tenant=e.tenant, frozen=e.frozen,
                     mode=e.mode.value, reason=e.reason, operator=e.operator,
                     event_id=e.event_id, at_ms=record.timestamp_ms)

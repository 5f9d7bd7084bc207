"""``ledger-stream mcp``: the ledger as an MCP server, so any MCP host (Claude, IDE agents,
the OpenAI Agents SDK, a non-Python agent) can apply an effect once per business operation.

Tools (structured content, JSON schemas from the models below):

- ``submit_effect(effect, arguments, wait_seconds)``: submit an intent for a registered
  effect; the same business id with the same arguments, from any session or after a server
  restart, gets the original receipt, never a second effect. Other arguments under the same
  business id are rejected (``reason: conflict``).
- ``get_operation(effect, arguments)``: the operation's state and its latest receipt (only
  the key fields of ``arguments`` are read), or ``found: false``.
- ``list_unresolved()``: the server tenant's operations whose effect is not settled yet.

The tenant, the effects (name → action and connector target) and the workflow identity come
from the server's configuration, never from the model. Every answer carries ``resolved``:
false while the effect's outcome is not settled (accepted, in progress, reconciling, held,
waiting for an operator), with ``hold_downstream: true``, so a host holds the work that
depends on it and asks ``get_operation`` again later. ``get_operation`` and
``list_unresolved`` judge the operation by its own status (``key_status``), not by the
latest receipt, which may answer another caller's rejected intent; ``submit_effect`` by the
answer to its own intent.

Every answer leads with ``state`` (the operation's) and ``answer`` (what the call got:
created, already_done, rejected, held, pending). A ``submit_effect`` the ledger refused
(rejected: a conflict, a missing approval, an expired key) or whose effect failed at the
target is a tool result with ``isError: true``, its structured content the same answer.

The operation key is derived by the server from the argument fields the effect's
registration names (``refund=refund@payments[invoice]``: ``tenant/refund/<invoice>``), never
from anything the model writes about the call itself: a regenerated answer or a new session
repeats the same business id, so it meets the same key. Only an effect registered with
``[unsafe-model-id]`` takes the key from a model-written ``operation_id``, and only then
do the tools take an ``operation_id`` at all (see mcp/effects.py for why that is unsafe).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent
from pydantic import BaseModel, Field

from ledger_stream.domain import events as ev
from ledger_stream.domain.keys import InvalidKeyError
from ledger_stream.history.detail import shown_detail
from ledger_stream.kafka.exceptions import KafkaSetupError
from ledger_stream.kafka.reader import tail_topic
from ledger_stream.mcp.effects import RegisteredEffect
from ledger_stream.sdk.client import LedgerClient
from ledger_stream.sdk.errors import (
    InvalidIntentError,
    LedgerUnavailable,
    StaleStatusError,
    ViewUnavailableError,
)
from ledger_stream.serde import DecodeError

SETTLED = frozenset({ev.ReceiptStatus.SUCCEEDED, ev.ReceiptStatus.FAILED,
                     ev.ReceiptStatus.REJECTED})
# A key holding a final outcome. A key whose state reads "rejected" holds none (never
# reserved, or its reservation refused): a repeat of the intent may reserve it now.
KEY_SETTLED = frozenset({ev.ReceiptStatus.SUCCEEDED, ev.ReceiptStatus.FAILED})
MAX_WAIT_S = 120.0
Arguments = Annotated[dict[str, Any], Field(
    description="the effect's arguments; its key arguments (see the tool's description) "
    "name the operation")]
ModelId = Annotated[str | None, Field(
    description="only for an effect keyed by operation_id: a stable business id (an "
    "invoice or order number), never a per-call id")]


class Operation(BaseModel):
    """What the ledger says about one operation (no payment details: ids and hashes)."""

    found: bool = Field(description="false: the ledger has no receipt for this operation")
    effect: str
    business_id: dict[str, str] = Field(description="the key fields' values: what "
                                        "get_operation needs as arguments")
    key: str = Field(description="the ledger's operation key")
    state: str | None = Field(None, description="the operation's state, whoever asked: "
                              "succeeded, failed, rejected (nothing holds it), held, accepted, "
                              "in_progress, reconciling, needs_reconciliation")
    answer: str | None = Field(None, description="what this call got: created (its effect), "
                               "already_done (an earlier call's effect: the original outcome), "
                               "rejected (see reason), held (see reason), pending (no outcome "
                               "yet); get_operation: the latest call the ledger answered")
    status: str | None = Field(None, description="submit_effect: the status of the answer to "
                               "this call; get_operation: the operation's state")
    key_status: str | None = Field(None, description="the operation's own status")
    reason: str | None = Field(None, description="why, for rejected or held (conflict, ...)")
    resolved: bool = Field(description="true once the outcome is settled")
    hold_downstream: bool = Field(description="true: hold work that depends on this effect "
                                  "and ask get_operation again later")
    external_id: str | None = Field(None, description="the target's id for the effect")
    attempts: int | None = None
    receipt_id: str | None = None
    detail: str | None = None


class Unresolved(BaseModel):
    operations: list[Operation]
    count: int
    skipped: int = Field(0, description="receipts records that did not decode (reported, "
                         "not fatal)")


def _answer(effect: RegisteredEffect, key: str, receipt: ev.Receipt | None,
            own: ev.Intent | None = None) -> Operation:
    """The operation as ``receipt`` shows it. With ``own`` (the intent this call submitted)
    and a receipt answering it, settled is that answer's status; otherwise the key's."""
    if receipt is None:
        # Submitted but not answered yet: hold. Never submitted: nothing to hold for.
        return Operation(found=False, effect=effect.name, business_id=effect.business_id(key),
                         key=key, answer=ev.Answer.PENDING.value if own is not None else None,
                         resolved=False, hold_downstream=own is not None,
                         detail="submitted; no receipt yet" if own is not None else None)
    answers_own = own is not None and receipt.intent_event_id == own.event_id
    resolved = (receipt.status if answers_own else receipt.key_status) in SETTLED
    asker = own.event_id if own is not None else receipt.intent_event_id
    return Operation(found=True, effect=effect.name, business_id=effect.business_id(key),
                     key=key, state=receipt.key_status.value,
                     answer=receipt.answer_to(asker).value,
                     status=(receipt.status if own is not None else receipt.key_status).value,
                     key_status=receipt.key_status.value,
                     reason=receipt.reason.value, resolved=resolved,
                     hold_downstream=not resolved, external_id=receipt.external_id or None,
                     attempts=receipt.attempts, receipt_id=receipt.receipt_id,
                     detail=shown_detail(receipt.detail) or None)


class LedgerTools:
    """The tools' logic, apart from the MCP plumbing (unit-testable with any client)."""

    def __init__(self, client: LedgerClient, tenant: str,
                 effects: dict[str, RegisteredEffect], graph: str = "mcp",
                 version: str = "1") -> None:
        self.client, self.tenant, self.effects = client, tenant, effects
        self.graph, self.version = graph, version

    def _effect(self, name: str) -> RegisteredEffect:
        try:
            return self.effects[name]
        except KeyError:
            raise ValueError(f"unknown effect {name!r}; this server offers "
                             f"{', '.join(sorted(self.effects))}") from None

    def _key(self, effect: RegisteredEffect, arguments: dict[str, Any],
             operation_id: str | None) -> str:
        try:
            return effect.key(self.tenant, arguments, operation_id)
        except InvalidKeyError as exc:
            raise ValueError(f"no operation key: {exc}") from None

    def submit(self, effect: str, arguments: dict[str, Any], wait_seconds: float,
               session: str, operation_id: str | None = None) -> Operation:
        """Submit ``arguments`` for ``effect`` under the key derived from them (from
        ``operation_id`` only for an effect registered ``[unsafe-model-id]``)."""
        spec = self._effect(effect)
        key = self._key(spec, arguments, operation_id)
        if not 0 <= wait_seconds <= MAX_WAIT_S:
            raise ValueError(f"wait_seconds must be between 0 and {MAX_WAIT_S:g}")
        try:
            intent = self.client.intent(key, spec.action, spec.target, arguments,
                                        workflow=ev.Workflow(self.graph, self.version,
                                                             session, spec.name))
        except (InvalidIntentError, TypeError) as exc:
            raise ValueError(str(exc)) from None
        try:
            receipt = self.client.submit(intent, wait_seconds, raise_errors=False)
        except TimeoutError:
            return _answer(spec, key, self._settled_for(intent), own=intent)
        except LedgerUnavailable as exc:
            raise ValueError(f"{exc}. Repeat the same call (same arguments) later: it is "
                             "safe") from None
        return _answer(spec, key, receipt, own=intent)

    def _settled_for(self, intent: ev.Intent) -> ev.Receipt | None:
        """No answer to ``intent`` within the wait: the key's settled receipt if it binds
        the same arguments (the ledger will answer the repeat with it), else nothing yet."""
        try:
            latest = self.client.status(intent.key)
        except (LedgerUnavailable, StaleStatusError, ViewUnavailableError, KafkaSetupError):
            return None
        if latest is None or latest.args_hash != intent.args_hash or \
                latest.key_status not in KEY_SETTLED:
            return None
        return latest

    def get(self, effect: str, arguments: dict[str, Any],
            operation_id: str | None = None) -> Operation:
        spec = self._effect(effect)
        key = self._key(spec, arguments, operation_id)
        try:
            return _answer(spec, key, self.client.status(key))
        except (LedgerUnavailable, StaleStatusError, ViewUnavailableError,
                KafkaSetupError) as exc:
            raise ValueError(f"cannot read {key} now: {exc}; ask again later") from None

    def unresolved(self) -> Unresolved:
        """Reads the receipts topic to its end (O(receipts): for a host's occasional look,
        not a hot path). A record that does not decode is counted in ``skipped``."""
        by_action = {e.action: e for e in self.effects.values()}
        latest: dict[str, ev.Receipt] = {}
        skipped = 0
        topic = self.client.settings.topic("receipts")
        for _, _, value in tail_topic(self.client.bootstrap, topic, follow=False):
            try:
                receipt = self.client.codec.decode(value) if value is not None else None
            except DecodeError:
                receipt = None
            if not isinstance(receipt, ev.Receipt):
                skipped += 1
                continue
            latest[receipt.key] = receipt
        found = []
        for key, receipt in sorted(latest.items()):
            tenant, _, rest = key.partition("/")
            action = rest.partition("/")[0]
            if tenant != self.tenant or action not in by_action:
                continue
            answer = _answer(by_action[action], key, receipt)
            if not answer.resolved:
                found.append(answer)
        return Unresolved(operations=found, count=len(found), skipped=skipped)


def _keyed_by(effect: RegisteredEffect) -> str:
    if effect.model_id:
        return f"{effect.name}: keyed by operation_id (a stable business id you give)"
    return f"{effect.name}: keyed by arguments {', '.join(effect.key_fields)}"


def build_server(tools: LedgerTools, session: str) -> MCPServer:
    """The MCP server over ``tools``; ``session`` names this server run in the intents'
    workflow identity (the thread field). The tools take an ``operation_id`` only when an
    effect is registered ``[unsafe-model-id]``: otherwise the model is never asked for one."""
    effects = tools.effects.values()
    keyed = "; ".join(_keyed_by(e) for e in effects)
    server = MCPServer(
        "ledger-stream", version="1",
        instructions=f"Applies effects once per business operation for tenant "
        f"{tools.tenant}. Effects offered: "
        f"{', '.join(f'{e.name} ({e.action} at {e.target})' for e in effects)}. Each "
        f"operation is identified by its business id ({keyed}): the same business id is "
        "the same operation, so repeat the same call safely after any error or restart. "
        "When an answer has resolved false, hold dependent work and call get_operation "
        "later.")
    if any(e.model_id for e in effects):
        _add_tools_with_model_id(server, tools, session, keyed)
    else:
        _add_tools(server, tools, session, keyed)

    @server.tool(description="Operations of this tenant whose effect is not settled yet "
                 "(accepted, in progress, reconciling, held, waiting for an operator).")
    def list_unresolved() -> Unresolved:
        return tools.unresolved()

    return server


def _submit_doc(keyed: str) -> str:
    return (f"Apply a registered effect once per business id (named by the effect's key "
            f"arguments: {keyed}). The same business id with the same arguments always "
            "returns the original outcome; with other arguments it is rejected (reason "
            "conflict).")


def _get_doc(keyed: str) -> str:
    return f"The latest state and receipt of an operation: give the effect and its key " \
        f"arguments ({keyed})."


def _tool_error(call: Callable[[], Operation]) -> Operation:
    try:
        return call()
    except ValueError as exc:  # the caller's mistake: a tool error saying which
        raise ToolError(str(exc)) from None


def refused(answer: Operation) -> bool:
    """A submit the ledger refused, or whose effect failed (the original's failure, for a
    repeat): a host must not read it as done."""
    return answer.answer == ev.Answer.REJECTED.value or (
        answer.answer in (ev.Answer.CREATED.value, ev.Answer.ALREADY_DONE.value)
        and answer.state == ev.ReceiptStatus.FAILED.value)


def _submitted(call: Callable[[], Operation]) -> CallToolResult:
    """A submit's answer as the tool's result: its structured content always, with
    ``isError`` when ``refused``."""
    answer = _tool_error(call)
    return CallToolResult(content=[TextContent(type="text",
                                               text=answer.model_dump_json(indent=2))],
                          structured_content=answer.model_dump(mode="json"),
                          is_error=refused(answer))


def _add_tools(server: MCPServer, tools: LedgerTools, session: str, keyed: str) -> None:
    """submit_effect and get_operation keyed by arguments only: no operation_id in sight."""

    @server.tool(description=_submit_doc(keyed))
    def submit_effect(effect: str, arguments: Arguments,
                      wait_seconds: float = 30.0) -> Annotated[CallToolResult, Operation]:
        return _submitted(lambda: tools.submit(effect, arguments, wait_seconds, session))

    @server.tool(description=_get_doc(keyed))
    def get_operation(effect: str, arguments: Arguments) -> Operation:
        return _tool_error(lambda: tools.get(effect, arguments))


def _add_tools_with_model_id(server: MCPServer, tools: LedgerTools, session: str,
                             keyed: str) -> None:
    """The same tools with an optional ``operation_id``, for a server where an effect opted
    in to the model's id (the effects keyed by arguments ignore it)."""

    @server.tool(name="submit_effect", description=_submit_doc(keyed))
    def submit_with_id(effect: str, arguments: Arguments, wait_seconds: float = 30.0,
                       operation_id: ModelId = None) -> Annotated[CallToolResult, Operation]:
        return _submitted(lambda: tools.submit(effect, arguments, wait_seconds, session,
                                               operation_id))

    @server.tool(name="get_operation", description=_get_doc(keyed))
    def get_with_id(effect: str, arguments: Arguments | None = None,
                    operation_id: ModelId = None) -> Operation:
        return _tool_error(lambda: tools.get(effect, arguments or {}, operation_id))

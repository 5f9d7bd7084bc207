"""The gateway's refusals as its OpenAPI document states them: which statuses a route can
answer besides its success, with the body each carries and the security it needs.

Every refusal's body is ``{"detail": "<what is wrong>"}`` (:class:`ErrorBody`), but a 422's,
whose ``detail`` lists each problem (:class:`ValidationErrorBody`) without the value sent.
A route lists only the statuses it can answer (tests/gateway/test_openapi_answers.py
produces each one against the running gateway): FastAPI's own 422, which it adds to every
route with a parameter, is dropped from routes that cannot answer it (``drop_implicit_422``).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

SCHEME = "apiKey"  # the bearer scheme's name under components.securitySchemes
OPERATOR_ROLE = "operator"  # an OpenAPI 3.1 role: a key given as TENANT:operator:NAME=KEY
# Route security as an operation's ``security``: any known key, an operator's key, none.
ANY_KEY: dict[str, Any] = {"security": [{SCHEME: []}]}
OPERATOR_KEY: dict[str, Any] = {"security": [{SCHEME: [OPERATOR_ROLE]}]}
PUBLIC: dict[str, Any] = {"security": []}


class ErrorBody(BaseModel):
    """A refusal: nothing was done, and ``detail`` says why (never a payment detail)."""

    detail: str = Field(description="what is wrong, or what could not be reached")


class ValidationProblem(BaseModel):
    loc: list[str | int] = Field(description="where: body, query or header, then the field")
    msg: str = Field(description="what is wrong with it (the value is never echoed)")
    type: str = Field(description="the problem's kind, e.g. missing, less_than_equal")


class ValidationErrorBody(BaseModel):
    """A request whose fields do not validate: one entry a problem."""

    detail: list[ValidationProblem]


AUTH_HEADER = {"WWW-Authenticate": {"description": "Bearer", "schema": {"type": "string"}}}
RETRY_HEADER = {"Idempotency-Key": {
    "description": "the key to retry this command with (the request's, or a new one)",
    "schema": {"type": "string"}}}

INVALID = "invalid: the detail says what (a malformed operation key, ...)"
NO_KEY = "no API key, or one the gateway does not know"
OTHER_TENANT = "the operation key belongs to another tenant than the API key's"
NOT_OPERATOR = ("an agent's key (operator routes need a key given as "
                "TENANT:operator:NAME=KEY), or a key of another tenant than the operation "
                "key's")
NOT_FOUND = "no record of the key in the ledger"
UNVALIDATED = "a field is missing, of the wrong type or out of range"
UNAVAILABLE = "the ledger (Kafka) or what the route reads cannot be reached: retry"
DESCRIPTIONS = {400: INVALID, 401: NO_KEY, 403: OTHER_TENANT, 404: NOT_FOUND,
                409: "refused: a conflict with what the ledger holds", 422: UNVALIDATED,
                503: UNAVAILABLE}


def refusals(*statuses: int, **why: str) -> dict[int | str, dict[str, Any]]:
    """The ``responses`` of a route that can answer ``statuses``; ``why`` (``s403=...``)
    says more than the status's usual description."""
    answers: dict[int | str, dict[str, Any]] = {}
    for status in statuses:
        answer: dict[str, Any] = {
            "model": ValidationErrorBody if status == 422 else ErrorBody,
            "description": why.get(f"s{status}", DESCRIPTIONS[status])}
        if status == 401:
            answer["headers"] = AUTH_HEADER
        answers[status] = answer
    return answers


KEY_READS = refusals(400, 401, 403, 404, 503, s400="a malformed operation key",
                     s404="no record of the key in the ledger (for /v1/operations: no "
                     "receipt yet)", s503="the ledger or the view cannot be reached, or the "
                     "view is behind: retry")
FREEZE_COMMANDS = refusals(400, 401, 403, 422, 503, s403="an agent's key: freezes need a key "
                           "given as TENANT:operator:NAME=KEY", s400="an action the ledger "
                           "does not take, or an operator named in the query")
FREEZE_COMMANDS[503] = {"model": ErrorBody, "headers": RETRY_HEADER, "description": (
    "the audit record cannot be written (the command is not sent) or Kafka cannot be "
    "reached: retry with the Idempotency-Key header the answer names (a command the "
    "processors applied already is not applied again)")}


def drop_implicit_422(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` without FastAPI's own 422 answers (and their models): a route that can
    answer 422 declares it with :class:`ValidationErrorBody`, the body it really sends."""
    implicit = "#/components/schemas/HTTPValidationError"
    for path in schema.get("paths", {}).values():
        for operation in path.values():
            answer = operation.get("responses", {}).get("422", {})
            ref = answer.get("content", {}).get("application/json", {}).get("schema", {})
            if ref.get("$ref") == implicit:
                del operation["responses"]["422"]
    models = schema.get("components", {}).get("schemas", {})
    for name in ("HTTPValidationError", "ValidationError"):
        models.pop(name, None)
    return schema

"""Who calls a gateway route, and the checks every route makes: the tenant an API key acts
for, the operator holding it, whether a key is the caller's; and a blocking read run off the
event loop. The routes (``app.py``, ``approvals.py``) take them as FastAPI dependencies.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, TypeVar

from fastapi import Depends, Header, HTTPException, Request

from ledger_stream.domain.keys import InvalidKeyError, checked_key, tenant_of
from ledger_stream.gateway.auth import ApiKeys, Holder
from ledger_stream.operate import Actor
from ledger_stream.operate.audit import ROLE_OPERATOR

T = TypeVar("T")


def tenant_of_request(request: Request,
                      authorization: Annotated[str | None, Header()] = None) -> str:
    """The tenant the request's API key acts for; 401 without a known key."""
    scheme, _, token = (authorization or "").partition(" ")
    keys: ApiKeys = request.app.state.keys
    found = keys.tenant_of(token.strip()) if scheme.lower() == "bearer" else None
    if found is None:
        raise HTTPException(401, "send Authorization: Bearer <API key>",
                            headers={"WWW-Authenticate": "Bearer"})
    return found


def operator_of_request(request: Request,
                        authorization: Annotated[str | None, Header()] = None) -> Holder:
    """The holder of the request's API key when it is an operator's
    (``TENANT:operator:NAME=KEY``); 401 without a known key, 403 for any other key; 400
    when the query names an operator (on every operator route: never silently ignored, so
    a script that thinks it names the operator learns why)."""
    tenant_of_request(request, authorization)
    keys: ApiKeys = request.app.state.keys
    holder = keys.holder_of((authorization or "").partition(" ")[2].strip())
    if holder is None or not holder.is_operator:
        raise HTTPException(403, "this API key is not an operator's: operator routes "
                            "(decisions, freezes) need a key given as "
                            "TENANT:operator:NAME=KEY")
    if {"operator", "by"} & set(request.query_params):
        raise HTTPException(400, "the operator is the holder of the API key "
                            "(TENANT:operator:NAME=KEY): leave 'operator' out")
    return holder


def actor_of(holder: Holder) -> Actor:
    """The audited identity of an operator key's holder: its name and the key's id."""
    return Actor(holder.operator, ROLE_OPERATOR, holder.key_id)


Tenant = Annotated[str, Depends(tenant_of_request)]
Operator = Annotated[Holder, Depends(operator_of_request)]


def own(tenant: str, key: str) -> None:
    """400 unless ``key`` is an operation key; 403 unless it is ``tenant``'s."""
    try:
        checked_key(key)
    except InvalidKeyError as exc:
        raise HTTPException(400, f"{key!r}: {exc}") from None
    if tenant_of(key) != tenant:
        raise HTTPException(403, f"{key} belongs to another tenant than this API key's")


async def off_loop(fn: Callable[..., T], *args: Any) -> T:
    """A blocking call in the event loop's default thread pool (the submit path's too), its
    answer awaited. Whole-topic scans go to the scan threads instead (scans.py)."""
    result: Awaitable[T] = asyncio.to_thread(fn, *args)
    return await result

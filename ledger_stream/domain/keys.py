"""Operation keys and material-argument hashing.

An operation key names one business intent (tenant + action + business object). It is
derived from domain facts, never from run ids, checkpoint ids, node order or random ids
minted inside a node, so every re-execution of a step derives the same key.
"""

from __future__ import annotations

import hashlib
import json
import math
import unicodedata
from decimal import Decimal
from typing import Any

_KEY_PART_FORBIDDEN = ("/", "\n", "\x00")
# Tenant names the ledger keys its own records under, which no tenant may hold (a tenant so
# named would read those records as its own keys): ``~freeze/<scope>`` (the audit of a
# freeze), ``~containment/...`` (freeze commands); ``*``, every tenant in a freeze's scope;
# ``unmapped/<target>/<hash>``, an effect a watcher found made around the ledger that its
# key template maps to no key (read by operators, never by a tenant's key).
RESERVED_TENANT_START = "~"
EVERY_TENANT = "*"
UNMAPPED_TENANT = "unmapped"
# The longest operation key a request naming one takes (an approval, a watcher's record).
KEY_LIMIT = 1024


class InvalidKeyError(ValueError):
    """A key part is empty or contains a separator."""


def operation_key(tenant: str, action: str, *business_ids: str | int) -> str:
    """``operation_key("acme", "refund", "invoice-881") == "acme/refund/invoice-881"``.

    Raises InvalidKeyError when a part is empty or contains ``/``, a newline or NUL, since
    such a part would let two different intents share one key.
    """
    if not business_ids:
        raise InvalidKeyError("an operation key needs at least one business id")
    parts = [tenant, action, *(str(part) for part in business_ids)]
    for part in parts:
        if not part or any(ch in part for ch in _KEY_PART_FORBIDDEN):
            raise InvalidKeyError(f"invalid operation key part {part!r}")
        try:
            part.encode("utf-8")  # Kafka keys are UTF-8: a lone surrogate has no bytes
        except UnicodeEncodeError:
            raise InvalidKeyError(f"operation key part {part!r} is not valid Unicode") from None
    return "/".join(parts)


def reserved_tenant(tenant: str) -> str | None:
    """Why ``tenant`` may not name a tenant (the ledger keys its own records so), or None."""
    if tenant.startswith(RESERVED_TENANT_START) or tenant in (EVERY_TENANT, UNMAPPED_TENANT):
        return (f"a tenant's name neither begins with {RESERVED_TENANT_START!r} nor is "
                f"{EVERY_TENANT!r} or {UNMAPPED_TENANT!r} (the ledger's own records are "
                "keyed so)")
    return None


def business_id_part(value: object) -> str:
    """One business id value as it enters a key, by one rule wherever a key is derived from
    arguments (``ledger_tool(key="invoice")``, the agent middleware, the MCP server):
    text, with surrounding whitespace dropped and in Unicode NFC (an accent written composed
    or decomposed is one id), or an integer (``42`` and ``"42"`` are one id).

    Anything else raises InvalidKeyError: a float (``42`` and ``42.0`` would be two keys), a
    boolean, ``None``, an object or list (their text form is not an id). Text that is empty
    or holds ``/`` is refused when the key is built (operation_key)."""
    if isinstance(value, str):
        return unicodedata.normalize("NFC", value).strip()
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    raise InvalidKeyError(f"a business id is text or an integer, not {type(value).__name__} "
                          f"{value!r}")


def checked_key(text: str) -> str:
    """``text`` if it is an operation key (tenant/action/business-id...); InvalidKeyError
    saying why not otherwise."""
    parts = text.split("/")
    if len(parts) < 3:
        raise InvalidKeyError("an operation key is tenant/action/business-id")
    return operation_key(*parts)


def tenant_of(key: str) -> str:
    return key.split("/", 1)[0]


def _number(value: int | float | Decimal) -> str:
    """Canonical text of a number: integral values as integers (10, 10.0 and
    Decimal("10.00") are one amount), others as the shortest exact decimal, never through
    binary floating point (Decimal("0.1000000000000000055") stays distinct from 0.1)."""
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError("material arguments must not contain NaN or infinity")
        value = Decimal(repr(value))  # the shortest text that round-trips this float
    elif isinstance(value, Decimal) and not value.is_finite():
        raise ValueError("material arguments must not contain NaN or infinity")
    if isinstance(value, int):
        return str(value)
    if value == value.to_integral_value():
        return str(int(value))
    # format(..., "f") writes every digit (normalize() would round to 28 significant ones)
    return format(value, "f").rstrip("0")


def _write(value: Any, out: list[str]) -> None:
    if value is None or isinstance(value, bool):
        out.append(json.dumps(value))
    elif isinstance(value, str):
        out.append(json.dumps(value, ensure_ascii=False))
    elif isinstance(value, int | float | Decimal):
        out.append(_number(value))
    elif isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            # {1: x} and {"1": x} must not become one object
            raise TypeError("material argument object keys must be strings")
        out.append("{")
        for i, k in enumerate(sorted(value)):
            out.append("," if i else "")
            out.append(json.dumps(k, ensure_ascii=False) + ":")
            _write(value[k], out)
        out.append("}")
    elif isinstance(value, list | tuple):
        out.append("[")
        for i, item in enumerate(value):
            out.append("," if i else "")
            _write(item, out)
        out.append("]")
    else:
        raise TypeError(f"material arguments must be JSON values, not {type(value).__name__}")


def canonical_json(value: Any) -> str:
    """Canonical JSON: sorted keys, no insignificant whitespace, normalised numbers.

    Raises TypeError for non-string object keys or non-JSON values, ValueError for NaN and
    infinity: such arguments have no single canonical form.
    """
    out: list[str] = []
    _write(value, out)
    return "".join(out)


def sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def args_hash(material_args: Any) -> str:
    """SHA-256 (hex) of the canonical JSON of the material arguments."""
    return sha256_hex(canonical_json(material_args))

"""Operation keys and material-argument hashing.

An operation key names one business intent (tenant + action + business object). It is
derived from domain facts, never from run ids, checkpoint ids, node order or random ids
minted inside a node, so every re-execution of a step derives the same key.
"""

from __future__ import annotations

import hashlib
import json
import math
from decimal import Decimal
from typing import Any

_KEY_PART_FORBIDDEN = ("/", "\n", "\x00")


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
    return "/".join(parts)


def tenant_of(key: str) -> str:
    return key.split("/", 1)[0]


def _normalise(value: Any) -> Any:
    if isinstance(value, bool) or value is None or isinstance(value, str | int):
        return value
    if isinstance(value, float | Decimal):
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError("material arguments must not contain NaN or infinity")
        # 10, 10.0 and Decimal("10.00") are one amount: integral numbers become ints, the
        # rest use the shortest round-tripping decimal text.
        if value == int(value):
            return int(value)
        return float(value)
    if isinstance(value, dict):
        return {str(k): _normalise(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_normalise(v) for v in value]
    raise TypeError(f"material arguments must be JSON values, not {type(value).__name__}")


def canonical_json(value: Any) -> str:
    """Canonical JSON: sorted keys, no insignificant whitespace, normalised numbers."""
    return json.dumps(
        _normalise(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False,
        allow_nan=False,
    )


def sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def args_hash(material_args: Any) -> str:
    """SHA-256 (hex) of the canonical JSON of the material arguments."""
    return sha256_hex(canonical_json(material_args))

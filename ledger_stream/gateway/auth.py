"""API keys: each acts for one tenant, and a tenant's key reads and writes only keys that
begin with ``<tenant>/``. Keys are kept as SHA-256 digests and compared in constant time.

A key names its holder:

- ``TENANT:operator:NAME=KEY`` is operator NAME's: it submits and reads, and the operator
  routes (reconciliation decisions, freezes) take the operator's identity from it, never
  from a field of the request. The audit topic records NAME and the key's id.
- ``TENANT:agent=KEY`` is an agent's: it submits and reads; the operator routes refuse it.
- ``TENANT=KEY`` (no role: the format before keys named their holder) is an agent's too. A
  key that names nobody cannot be audited as anyone, and one handed to a worker would let
  it decide its own unknown outcome "not applied" and have the effect sent again; so the
  least privilege is the default, and ``unnamed`` lists such keys for a startup warning.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ledger_stream.domain.keys import InvalidKeyError, operation_key, reserved_tenant


class ApiKeyError(ValueError):
    """The API key configuration is malformed (says where)."""


AGENT = "agent"
OPERATOR = "operator"
OPERATOR_NAME = re.compile(r"[A-Za-z0-9._@+-]{1,64}")


@dataclass(frozen=True)
class Holder:
    """Who a key acts for: its tenant, and the operator's name (empty: an agent's key)."""

    tenant: str
    operator: str
    key_id: str  # "key:" + the first 12 hex digits of the key's SHA-256: names, never reveals

    @property
    def is_operator(self) -> bool:
        return bool(self.operator)


class ApiKeys:
    def __init__(self, pairs: list[tuple[str, str]], agents: frozenset[str] = frozenset(),
                 operators: Mapping[str, str] | None = None,
                 unnamed: tuple[str, ...] = ()) -> None:
        """``pairs``: (tenant, key); ``operators``: key → the operator's name, for the keys
        the operator routes accept (every other key is an agent's); ``agents``: keys given
        as agents' (``TENANT:agent=KEY`` or ``TENANT=KEY``; a key also in ``operators`` is
        refused: a key has one holder); ``unnamed``: where keys without a role were given
        (``TENANT=KEY``)."""
        operators = dict(operators or {})
        self.unnamed = unnamed
        self._by_digest: dict[bytes, Holder] = {}
        for tenant, key in pairs:
            try:
                operation_key(tenant, "check", "check")
            except InvalidKeyError as exc:
                raise ApiKeyError(f"tenant {tenant!r}: {exc}") from None
            reserved = reserved_tenant(tenant)  # the ledger's own: domain/keys.py
            if reserved is not None:
                raise ApiKeyError(f"tenant {tenant!r}: {reserved}")
            if len(key) < 16:
                raise ApiKeyError(f"the key of tenant {tenant!r} is shorter than 16 characters")
            if key in agents and key in operators:
                raise ApiKeyError(f"one key of tenant {tenant!r} is given as an agent's and "
                                  f"as operator {operators[key]!r}'s: a key has one holder")
            digest = _digest(key)
            holder = Holder(tenant, operators.get(key, ""), "key:" + digest.hex()[:12])
            known = self._by_digest.get(digest)
            if known is not None and known.tenant != tenant:
                raise ApiKeyError(f"one API key is given to tenants {known.tenant!r} "
                                  f"and {tenant!r}: each key acts for one tenant")
            if known is not None and known != holder:
                raise ApiKeyError(f"one key of tenant {tenant!r} is given to two holders "
                                  f"({known.operator or AGENT!r} and "
                                  f"{holder.operator or AGENT!r}): a key has one holder")
            self._by_digest[digest] = holder
        if not self._by_digest:
            raise ApiKeyError("no API keys: give TENANT:operator:NAME=KEY or "
                              "TENANT:agent=KEY pairs (--keys, LEDGER_API_KEYS, or "
                              "--keys-file)")

    @classmethod
    def parse(cls, text: str = "", file: Path | None = None) -> ApiKeys:
        """``TENANT:operator:NAME=KEY``, ``TENANT:agent=KEY`` or ``TENANT=KEY`` (an agent's)
        entries, comma- or newline-separated, from ``text`` and ``file``."""
        entries = [(f"--keys item {i + 1}", item) for i, item in enumerate(
            p.strip() for p in text.replace("\n", ",").split(","))]
        if file is not None:
            try:
                lines = file.read_text(encoding="utf-8").splitlines()
            except UnicodeDecodeError as exc:  # its message quotes the bytes: a key's
                raise ApiKeyError(f"cannot read {file}: not UTF-8 text (byte "
                                  f"{exc.start + 1})") from None
            except OSError as exc:
                raise ApiKeyError(f"cannot read {file}: {exc}") from None
            entries += [(f"{file}:{n}", line.strip()) for n, line in enumerate(lines, 1)]
        pairs: list[tuple[str, str]] = []
        agents: set[str] = set()
        operators: dict[str, str] = {}
        unnamed: list[str] = []
        for where, item in entries:
            if not item or item.startswith("#"):
                continue
            holder, eq, key = (part.strip() for part in item.partition("="))
            if not (eq and holder and key):
                raise ApiKeyError(f"{where}: not TENANT:operator:NAME=KEY or "
                                  "TENANT:agent=KEY")
            tenant, role, name = _holder(where, holder)
            if role == OPERATOR:
                if operators.get(key, name) != name:
                    raise ApiKeyError(f"{where}: this key is given to two holders "
                                      f"({operators[key]!r} and {name!r}): a key has one "
                                      "holder")
                operators[key] = name
            elif role == AGENT:
                agents.add(key)
            else:  # an agent's: also listed as an operator's, it is refused (one holder)
                agents.add(key)
                unnamed.append(where)
            pairs.append((tenant, key))
        return cls(pairs, frozenset(agents), operators, tuple(unnamed))

    def holder_of(self, key: str) -> Holder | None:
        """Who ``key`` acts for, or None for an unknown key."""
        digest = _digest(key)
        found = None
        for known, holder in self._by_digest.items():  # every entry: constant time
            if hmac.compare_digest(known, digest):
                found = holder
        return found

    def tenant_of(self, key: str) -> str | None:
        """The tenant ``key`` acts for, or None."""
        holder = self.holder_of(key)
        return holder.tenant if holder is not None else None

    def is_agents(self, key: str) -> bool:
        """Whether ``key`` is limited to agent routes: every known key but an operator's."""
        holder = self.holder_of(key)
        return holder is not None and not holder.is_operator


def _holder(where: str, text: str) -> tuple[str, str, str]:
    """(tenant, role, operator name) of the part before ``=``; role "" when none is given."""
    tenant, _, rest = (part.strip() for part in text.partition(":"))
    if not rest:
        return tenant, "", ""
    role, _, name = (part.strip() for part in rest.partition(":"))
    if role == AGENT and not name:
        return tenant, AGENT, ""
    if role == OPERATOR:
        if not OPERATOR_NAME.fullmatch(name):
            raise ApiKeyError(f"{where}: an operator's key names the operator: "
                              f"TENANT:{OPERATOR}:NAME=KEY, NAME 1 to 64 letters, digits or "
                              "'.', '_', '@', '+', '-'")
        return tenant, OPERATOR, name
    raise ApiKeyError(f"{where}: a key is TENANT:{OPERATOR}:NAME=KEY (an operator's) or "
                      f"TENANT:{AGENT}=KEY (an agent's), not {text!r}")


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode("utf-8")).digest()

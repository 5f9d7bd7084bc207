"""API keys: each acts for one tenant, and a tenant's key reads and writes only keys that
begin with ``<tenant>/``. Keys are kept as SHA-256 digests and compared in constant time.

A key given as ``TENANT:agent=KEY`` is an agent's: it submits and reads, but the operator
routes (reconciliation decisions, freezes) refuse it, so an agent (or a prompt that took it
over) cannot decide its own unknown outcome "not applied" and have the effect sent again.
A key given as ``TENANT=KEY`` may do both.
"""

from __future__ import annotations

import hashlib
import hmac
from pathlib import Path

from ledger_stream.domain.keys import InvalidKeyError, operation_key


class ApiKeyError(ValueError):
    """The API key configuration is malformed (says where)."""


AGENT = "agent"  # the one role a key may be limited to


class ApiKeys:
    def __init__(self, pairs: list[tuple[str, str]], agents: frozenset[str] = frozenset()
                 ) -> None:
        """``pairs``: (tenant, key); ``agents``: the keys limited to agent routes."""
        self._by_digest: dict[bytes, str] = {}
        self._agent_digests = {_digest(key) for key in agents}
        for tenant, key in pairs:
            try:
                operation_key(tenant, "check", "check")
            except InvalidKeyError as exc:
                raise ApiKeyError(f"tenant {tenant!r}: {exc}") from None
            if len(key) < 16:
                raise ApiKeyError(f"the key of tenant {tenant!r} is shorter than 16 characters")
            digest = _digest(key)
            if digest in self._by_digest and self._by_digest[digest] != tenant:
                raise ApiKeyError(f"one API key is given to tenants {self._by_digest[digest]!r} "
                                  f"and {tenant!r}: each key acts for one tenant")
            self._by_digest[digest] = tenant
        if not self._by_digest:
            raise ApiKeyError("no API keys: give TENANT=KEY pairs (--keys, LEDGER_API_KEYS, "
                              "or --keys-file)")

    @classmethod
    def parse(cls, text: str = "", file: Path | None = None) -> ApiKeys:
        """``TENANT=KEY`` (or ``TENANT:agent=KEY``) pairs, comma- or newline-separated, from
        ``text`` and ``file``."""
        entries = [(f"--keys item {i + 1}", item) for i, item in enumerate(
            p.strip() for p in text.replace("\n", ",").split(","))]
        if file is not None:
            try:
                lines = file.read_text(encoding="utf-8").splitlines()
            except OSError as exc:
                raise ApiKeyError(f"cannot read {file}: {exc}") from None
            entries += [(f"{file}:{n}", line.strip()) for n, line in enumerate(lines, 1)]
        pairs, agents = [], set()
        for where, item in entries:
            if not item or item.startswith("#"):
                continue
            tenant, eq, key = item.partition("=")
            if not (eq and tenant.strip() and key.strip()):
                raise ApiKeyError(f"{where}: not TENANT=KEY")
            tenant, colon, role = tenant.strip().partition(":")
            if colon:
                if role.strip() != AGENT:
                    raise ApiKeyError(f"{where}: the only role a key may be limited to is "
                                      f"{AGENT!r} (TENANT:{AGENT}=KEY), not {role.strip()!r}")
                agents.add(key.strip())
            pairs.append((tenant.strip(), key.strip()))
        return cls(pairs, frozenset(agents))

    def tenant_of(self, key: str) -> str | None:
        """The tenant ``key`` acts for, or None."""
        digest = _digest(key)
        for known, tenant in self._by_digest.items():
            if hmac.compare_digest(known, digest):
                return tenant
        return None

    def is_agents(self, key: str) -> bool:
        """Whether ``key`` is limited to agent routes (given as ``TENANT:agent=KEY``)."""
        digest = _digest(key)
        return any(hmac.compare_digest(known, digest) for known in self._agent_digests)


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode("utf-8")).digest()

"""API keys: each acts for one tenant, and a tenant's key reads and writes only keys that
begin with ``<tenant>/``. Keys are kept as SHA-256 digests and compared in constant time."""

from __future__ import annotations

import hashlib
import hmac
from pathlib import Path

from ledger_stream.domain.keys import InvalidKeyError, operation_key


class ApiKeyError(ValueError):
    """The API key configuration is malformed (says where)."""


class ApiKeys:
    def __init__(self, pairs: list[tuple[str, str]]) -> None:
        self._by_digest: dict[bytes, str] = {}
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
        """``TENANT=KEY`` pairs, comma- or newline-separated, from ``text`` and ``file``."""
        entries = [(f"--keys item {i + 1}", item) for i, item in enumerate(
            p.strip() for p in text.replace("\n", ",").split(","))]
        if file is not None:
            try:
                lines = file.read_text(encoding="utf-8").splitlines()
            except OSError as exc:
                raise ApiKeyError(f"cannot read {file}: {exc}") from None
            entries += [(f"{file}:{n}", line.strip()) for n, line in enumerate(lines, 1)]
        pairs = []
        for where, item in entries:
            if not item or item.startswith("#"):
                continue
            tenant, eq, key = item.partition("=")
            if not (eq and tenant.strip() and key.strip()):
                raise ApiKeyError(f"{where}: not TENANT=KEY")
            pairs.append((tenant.strip(), key.strip()))
        return cls(pairs)

    def tenant_of(self, key: str) -> str | None:
        """The tenant ``key`` acts for, or None."""
        digest = _digest(key)
        for known, tenant in self._by_digest.items():
            if hmac.compare_digest(known, digest):
                return tenant
        return None


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode("utf-8")).digest()

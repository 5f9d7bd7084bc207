"""Who may read what, for every HTTP surface that is not the gateway's own routes: the view
and the MCP server over HTTP take the gateway's tenant API keys (``ApiKeys``), and a key
reads only the operation keys of its tenant (``<tenant>/...``).

A surface without keys answers anyone, so it starts only when told so explicitly
(``--no-auth``, or development mode) and then only on a loopback address: an unauthenticated
reader must be on this host, and name it (``names_this_host``).

Metrics carry no operation key, tenant or payment detail, but they do say how much every
tenant does: ``/metrics`` answers a loopback peer (a Prometheus or agent on this host)
without a key, and any other peer only once metrics are opened (``metrics_host`` not a
loopback address, as for the processors' and connectors' metrics listeners).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from ledger_stream.config import Settings
from ledger_stream.domain.keys import tenant_of
from ledger_stream.gateway.auth import ApiKeyError, ApiKeys


class Unauthenticated(Exception):
    """No API key, or one no tenant has (401)."""


class Forbidden(Exception):
    """The key's tenant is not the tenant of what was asked for (403)."""


class ServingRefused(Exception):
    """A surface would answer anyone, or anyone beyond this host: refused at start."""


@dataclass(frozen=True)
class Reader:
    """The tenant a request reads for; ``tenant`` None: a server started with --no-auth,
    whose reader may read every key (it is on this host)."""

    tenant: str | None

    def check_key(self, key: str) -> None:
        """Forbidden unless ``key`` (an operation key) is this reader's tenant's."""
        if self.tenant is not None and tenant_of(key) != self.tenant:
            raise Forbidden(f"{key} belongs to another tenant than this API key's")

    def check_tenant(self, tenant: str) -> None:
        """Forbidden unless ``tenant`` is this reader's."""
        if self.tenant is not None and tenant != self.tenant:
            raise Forbidden("that tenant is not this API key's")


def bearer(authorization: str | None) -> str:
    """The token of an ``Authorization: Bearer <token>`` header ('' for none or another
    scheme)."""
    scheme, _, token = (authorization or "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


def reader_of(keys: ApiKeys | None, authorization: str | None) -> Reader:
    """The reader a request's ``Authorization`` header names; Unauthenticated without a
    known key. ``keys`` None: a --no-auth server, every request reads for every tenant."""
    if keys is None:
        return Reader(None)
    token = bearer(authorization)
    tenant = keys.tenant_of(token) if token else None
    if tenant is None:
        raise Unauthenticated("send Authorization: Bearer <API key> (a key of the tenant "
                              "whose operations you read)")
    return Reader(tenant)


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or 'localhost') is reachable only from this host."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a name: it may resolve to anything


def names_this_host(host_header: str | None) -> bool:
    """Whether a request's ``Host`` header names this host (a loopback address or
    'localhost', any port). A server without keys trusts that only this host reaches it;
    a web page in a browser here reaches it too once the page's own name resolves to
    127.0.0.1 (DNS rebinding), and then sends that name."""
    host = (host_header or "").strip()
    if host.startswith("["):
        name = host[1:].partition("]")[0]
    else:
        name = host.rpartition(":")[0] if host.count(":") == 1 else host
    return bool(name) and is_loopback(name)


def serving_keys(settings: Settings, *, no_auth: bool, host: str, surface: str,
                 ) -> ApiKeys | None:
    """The API keys ``surface`` (e.g. "the view") answers with, from ``--keys``,
    ``--keys-file`` or their ``LEDGER_API_KEYS*`` environment; None when it may serve
    without keys: ``no_auth`` or development mode, and ``host`` a loopback address.
    ServingRefused otherwise, saying what to give."""
    text = settings.gateway.keys.get_secret_value() if settings.gateway.keys else ""
    if text.strip() or settings.gateway.keys_file is not None:
        try:
            return ApiKeys.parse(text, settings.gateway.keys_file)
        except ApiKeyError as exc:
            raise ServingRefused(str(exc)) from exc
    if not (no_auth or settings.policy.dev_mode):
        raise ServingRefused(
            f"{surface} answers only API keys: give TENANT:operator:NAME=KEY or "
            f"TENANT:agent=KEY pairs (--keys-file, LEDGER_API_KEYS_FILE, --keys or "
            f"LEDGER_API_KEYS), or --no-auth to answer anyone on this host")
    if not is_loopback(host):
        raise ServingRefused(
            f"{surface} without API keys answers anyone who reaches it: it listens only on "
            f"a loopback address (127.0.0.1), not {host}")
    return None


def metrics_open(settings: Settings) -> bool:
    """Whether metrics may be read from beyond this host (``metrics_host`` not loopback)."""
    return not is_loopback(settings.process.metrics_host)


def may_read_metrics(settings: Settings, peer: str | None) -> bool:
    """Whether a request from ``peer`` (its address) may read ``/metrics`` without a key."""
    return metrics_open(settings) or (peer is not None and is_loopback(peer))

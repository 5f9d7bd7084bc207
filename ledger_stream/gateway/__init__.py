"""``ledger-stream api``: the ledger over HTTP, for agents in any language and for operators.

``auth`` maps API keys to tenants; ``models`` are the request and response bodies (the
OpenAPI schema); ``reads`` the Kafka reads and writes behind the routes; ``app`` the routes.
``build_app`` is imported when first asked for: the view and the MCP server take the same
API keys (``auth``) without needing the gateway's web framework (the ``api`` extra).
"""

from typing import Any

from ledger_stream.gateway.auth import ApiKeyError, ApiKeys

__all__ = ["ApiKeyError", "ApiKeys", "build_app"]


def __getattr__(name: str) -> Any:
    if name == "build_app":
        from ledger_stream.gateway.app import build_app

        return build_app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

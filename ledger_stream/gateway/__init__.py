"""``ledger-stream api``: the ledger over HTTP, for agents in any language and for operators.

``auth`` maps API keys to tenants; ``models`` are the request and response bodies (the
OpenAPI schema); ``reads`` the Kafka reads and writes behind the routes; ``app`` the routes.
"""

from ledger_stream.gateway.app import build_app
from ledger_stream.gateway.auth import ApiKeyError, ApiKeys

__all__ = ["ApiKeyError", "ApiKeys", "build_app"]

"""Where watchers read a target's effects: the payments sandbox's own ledger
(``GET /v1/ledger``). Other targets' sources (PostgreSQL's receipt table, a mailbox) are
not built yet."""

from __future__ import annotations

import json
import urllib.request

from ledger_stream.watch.watcher import SeenEffect


def sandbox_effects(base_url: str, timeout_s: float = 10.0) -> list[SeenEffect]:
    """Every effect the sandbox at ``base_url`` committed, oldest first."""
    with urllib.request.urlopen(f"{base_url.rstrip('/')}/v1/ledger",
                                timeout=timeout_s) as response:
        ledger = json.load(response)
    return [SeenEffect(str(e["idempotency_key"]), str(e["id"]), e.get("body"))
            for e in ledger.get("effects", ())]

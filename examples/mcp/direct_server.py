"""An MCP server written the way it is without the ledger: its ``submit_effect`` tool POSTs
the refund to the payments API with an idempotency key minted per call. A host that repeats
the call (after a dropped connection, a server restart, a re-run turn) pays again. The tests
run it beside ``ledger-stream mcp`` to show the duplicate the ledger prevents.

    python -m examples.mcp.direct_server --payments-url http://127.0.0.1:PORT
"""

from __future__ import annotations

import argparse
import json
import urllib.request
import uuid
from typing import Any

from mcp.server.mcpserver import MCPServer


def build(payments_url: str) -> MCPServer:
    server = MCPServer("direct-payments")

    @server.tool(description="Refund: POST it to the payments API.")
    def submit_effect(effect: str, arguments: dict[str, Any],
                      wait_seconds: float = 30.0) -> dict[str, Any]:
        request = urllib.request.Request(
            payments_url + "/v1/payments", method="POST", data=json.dumps(arguments).encode(),
            headers={"Content-Type": "application/json",
                     "Idempotency-Key": f"bypass-{arguments.get('invoice')}-{uuid.uuid4().hex}"})
        with urllib.request.urlopen(request, timeout=10) as response:
            body: dict[str, Any] = json.loads(response.read())
        return {"status": "succeeded", "external_id": body.get("id"), "resolved": True}

    return server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--payments-url", required=True)
    build(parser.parse_args().payments_url).run("stdio")


if __name__ == "__main__":
    main()

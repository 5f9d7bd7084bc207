"""The ledger as an MCP server (``ledger-stream mcp``; ``pip install ledger-stream[mcp]``).

:func:`~ledger_stream.mcp.server.build_server` gives an ``MCPServer`` with the tools
``submit_effect``, ``get_operation`` and ``list_unresolved`` over a :class:`LedgerClient`;
the effects it offers are registered by the operator (:mod:`ledger_stream.mcp.effects`).
Tested with mcp 2.3.0.
"""

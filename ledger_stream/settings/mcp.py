"""The MCP server (``ledger-stream mcp``): what it offers is the operator's choice, not the
model's."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ledger_stream.settings.group import SettingsGroup, flat_config


class McpSettings(SettingsGroup):
    """The MCP server's tenant, effects and transport (flat names ``mcp_*``)."""

    model_config = flat_config("mcp_")

    tenant: str | None = Field(None, description="tenant of every operation the MCP "
                               "server submits")
    effects: str | None = Field(None, description="effects the MCP server offers, "
                                "NAME=ACTION@TARGET[FIELD,...][,...], the fields naming the "
                                "business id its key is derived from (e.g. "
                                "refund=refund@payments[invoice])")
    transport: Literal["stdio", "http"] = Field(
        "stdio", description="MCP transport: stdio, or streamable HTTP")
    host: str = Field("127.0.0.1", description="address the MCP server listens on (http)")
    port: int = Field(8078, ge=0, le=65535, description="the MCP server's HTTP port")

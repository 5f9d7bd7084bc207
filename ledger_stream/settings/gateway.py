"""The HTTP gateway (``ledger-stream api``): its address and the API keys it accepts."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, SecretStr

from ledger_stream.settings.group import SettingsGroup, flat_config


class GatewaySettings(SettingsGroup):
    """The gateway's listener and its callers' keys (flat names ``api_*``)."""

    model_config = flat_config("api_")

    host: str = Field("127.0.0.1", description="address the gateway listens on")
    port: int = Field(8079, ge=0, le=65535, description="the gateway's port (0: any)")
    keys: SecretStr | None = Field(
        None, description="API keys, TENANT:operator:NAME=KEY or TENANT:agent=KEY, comma-"
        "separated (each key acts for its tenant; TENANT=KEY is an agent's)")
    keys_file: Path | None = Field(
        None, description="file of API keys, one TENANT:operator:NAME=KEY or "
        "TENANT:agent=KEY per line (# comments)")

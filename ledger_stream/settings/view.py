"""The receipts view (``ledger-stream view``) and the clients that ask it."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, SecretStr

from ledger_stream.settings.group import SettingsGroup, flat_config

# Seconds a view connection may take over each read and write of its socket: a request line
# and headers sent no faster, or a keep-alive connection idle that long, is closed. A long
# poll (wait_ms, at most 30 s) waits for the view, not the socket, so it never runs into it.
IDLE_TIMEOUT_S = 30.0
# Connections the view serves at once, one thread each (the gateway's and the SDKs'
# keep-alive connections): one more is answered 503 and closed at once, given no thread.
# Every thread of a view client keeps its connection open while in use (a gateway holds
# up to about 40), so the bound sits well above what a few gateways and agents hold.
MAX_CONNECTIONS = 1024


class ViewSettings(SettingsGroup):
    """Where the view listens and keeps its store, and how clients reach it (flat names
    ``view_*``)."""

    model_config = flat_config("view_")

    url: str | None = Field(
        None, description="receipts view the SDK's status asks (e.g. http://127.0.0.1:8077); "
        "unset: status reads the key's partition")
    key: SecretStr | None = Field(
        None, description="API key the clients of the view send (a key of the tenant whose "
        "operations they read); the gateway forwards its caller's key instead")
    host: str = Field("127.0.0.1", description="address the view listens on")
    port: int = Field(8077, ge=0, le=65535, description="the view's HTTP port (0: any)")
    state_dir: Path | None = Field(None, description="view store (default: HOME/view)")
    timeline: bool = Field(
        True, description="the view also keeps every key's timeline (every record of every "
        "ledger topic, by key) for inspect, evidence and the gateway")
    idle_timeout_s: float = Field(
        IDLE_TIMEOUT_S, gt=0, description="seconds a view connection may stay silent (a "
        "request sent no faster, or an idle keep-alive connection) before it is closed")
    max_connections: int = Field(
        MAX_CONNECTIONS, ge=1, description="connections the view serves at once (a thread "
        "each); one more is answered 503 and closed")

"""Serving the gateway with uvicorn until SIGTERM or SIGINT, then exiting 0 like every
ledger process (uvicorn's own handling re-raises the signal once it has shut down, which
ends the process by that signal)."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator

import uvicorn
from starlette.types import ASGIApp


class GatewayServer(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: setattr(self, "should_exit", True))
        yield


def serve(app: ASGIApp, host: str, port: int) -> None:
    """Serve ``app`` until told to stop. OSError when the address cannot be bound."""
    server = GatewayServer(uvicorn.Config(app, host=host, port=port, log_config=None,
                                          access_log=False))
    try:
        server.run()
    except SystemExit:  # uvicorn exits (3) when it cannot bind
        raise OSError(f"could not listen on {host}:{port} (see the log above)") from None
    if not server.started:
        raise OSError(f"could not listen on {host}:{port} (see the log above)")

"""The view (latest receipts and, by default, timelines) served in the test's process."""

from __future__ import annotations

from pathlib import Path

from ledger_stream.config import Settings
from ledger_stream.gateway.auth import ApiKeys
from ledger_stream.history.reader import ROLES
from ledger_stream.serde import AvroCodec
from ledger_stream.view import HistoryView, ReceiptView, ViewStore
from ledger_stream.view.server import make_server, serve_in_thread


class ServedView:
    def __init__(self, settings: Settings, folder: Path, timeline: bool = True,
                 start: bool = True, keys: ApiKeys | None = None) -> None:
        """``keys`` None: the view answers without a key (on 127.0.0.1, as --no-auth)."""
        assert settings.kafka_bootstrap
        self.store = ViewStore(folder)
        self.view = ReceiptView(settings.kafka_bootstrap, settings.topic("receipts"),
                                self.store, close_store=False)
        self.timeline = HistoryView(settings.kafka_bootstrap,
                                    {role: settings.topic(role) for role in ROLES},
                                    self.store, AvroCodec()) if timeline else None
        if start:
            self.view.start()
            if self.timeline is not None:
                self.timeline.start()
        self.server = make_server(self.view, AvroCodec(), "127.0.0.1", 0, self.timeline,
                                  keys=keys)
        serve_in_thread(self.server)
        self.url = f"http://127.0.0.1:{self.server.server_port}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.view.close()
        if self.timeline is not None:
            self.timeline.close()
        self.store.close()

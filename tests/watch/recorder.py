"""A recorder of what the watcher produces (a fixtures module: it holds no tests)."""

from __future__ import annotations

from typing import Any

from ledger_stream.kafka.exceptions import DeliveryFailed


class Recorder:
    def __init__(self) -> None:
        self.sent: list[tuple[str, Any]] = []
        self.fail_next_flush = False

    def send(self, role: str, event: Any) -> None:
        self.sent.append((role, event))

    def flush(self) -> None:
        if self.fail_next_flush:
            self.fail_next_flush = False
            self.sent.clear()
            raise DeliveryFailed("not acknowledged")

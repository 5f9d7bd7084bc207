"""Effects watched at the target: each effect the target itself records, reported to the
ledger, so an effect no intent reserved, or a second one for a key, raises an alert even
when no connector ever saw it (``ledger-stream watch``)."""

from ledger_stream.watch.watcher import SeenEffect, Watcher, key_for

__all__ = ["SeenEffect", "Watcher", "key_for"]

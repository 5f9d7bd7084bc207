"""librdkafka's own log lines through Python logging, one structured line each.

Every Kafka client of the project is configured with ``client_config.CLIENT_CONFIG``, which
names :data:`LOGGER`. librdkafka then
hands its lines to the ``librdkafka`` logger (when the client is polled) instead of writing
them raw to stderr. An unreachable broker makes librdkafka repeat the same line many times a
second. :class:`FoldRepeats` passes each distinct line once per window, and the next one it
passes counts the repeats it held back (``repeated``).
"""

from __future__ import annotations

import logging
import re
import threading
import time
from typing import Any

LOGGER = logging.getLogger("librdkafka")
WARNING = 4  # syslog level: librdkafka's warnings and errors, not its chatter
_ELAPSED = re.compile(r"\d+ms\b")  # "after 52ms": the part of a repeated line that changes


class FoldRepeats(logging.Filter):
    """One line per distinct librdkafka message (numbers aside) per ``window_s``; the
    line's facility and client become fields."""

    def __init__(self, window_s: float = 30.0, clock: Any = time.monotonic) -> None:
        super().__init__()
        self.window_s, self._clock = window_s, clock
        self._seen: dict[tuple[str, str], tuple[float, int]] = {}  # -> (passed at, held)
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if not (isinstance(args, tuple) and len(args) == 3):
            return True  # not librdkafka's "%s [%s] %s" line
        facility, client, text = (str(a) for a in args)
        key = (f"{facility} {client}", _ELAPSED.sub("#ms", text))
        now = self._clock()
        with self._lock:
            passed_at, held = self._seen.get(key, (None, 0))
            if passed_at is not None and now - passed_at < self.window_s:
                self._seen[key] = (passed_at, held + 1)
                return False
            if len(self._seen) > 1000:  # forget the oldest lines, not the counts of all
                for old in list(self._seen)[:100]:
                    del self._seen[old]
            self._seen[key] = (now, 0)
        record.msg, record.args = text, ()
        fields: dict[str, Any] = {"facility": facility, "client": client}
        if held:
            fields["repeated"] = held
        record.fields = {**getattr(record, "fields", {}), **fields}
        return True


LOGGER.addFilter(FoldRepeats())  # every client that logs through LOGGER imports this

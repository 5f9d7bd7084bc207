"""Structured logs: one JSON object per line on stderr.

Log records carry ids and hashes (operation key, args hash, event ids), never material
arguments, payloads or secrets; callers pass those fields through ``extra={"fields": {...}}``.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            entry.update(fields)
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def level_name(text: str) -> str:
    """``text`` as one of LEVELS (any case); ValueError naming the choices otherwise."""
    name = text.strip().upper()
    if name not in LEVELS:
        raise ValueError(f"log level must be one of {', '.join(LEVELS)}, got {text!r}")
    return name


def configure_logging(level: str | None = None) -> None:
    """JSON lines on stderr at ``level`` (default INFO); ValueError for an unknown level."""
    name = level_name(level or "INFO")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(name)


def log_fields(**fields: Any) -> dict[str, Any]:
    """``extra=`` argument for a structured log call."""
    return {"fields": fields}

"""The settings of every command, under the import path they always had.

The groups live in ``ledger_stream.settings`` (one module per concern); this module keeps
``from ledger_stream.config import Settings, load_settings, ...`` working.
"""

from __future__ import annotations

from ledger_stream.settings import (
    DAY_MS,
    ENV_PREFIX,
    MetricsPort,
    Settings,
    load_settings,
    shared_jar_cache,
)

__all__ = ["DAY_MS", "ENV_PREFIX", "MetricsPort", "Settings", "load_settings",
           "shared_jar_cache"]

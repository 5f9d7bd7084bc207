"""The environment of a test that runs commands in-process with no broker: shared by the
settings tests (an autouse fixture of each calls :func:`isolate`)."""

from __future__ import annotations

from pathlib import Path

import pytest


def isolate(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No Kafka bootstrap, development mode, ``tmp_path`` as home and working folder, and
    no settings file. --config is kept in LEDGER_CONFIG for the process: unset after each
    test (set first: delenv of an unset name would not undo a later set, and the file would
    then reach every process a later test starts)."""
    monkeypatch.setenv("LEDGER_CONFIG", "")
    monkeypatch.delenv("LEDGER_CONFIG")
    monkeypatch.delenv("LEDGER_KAFKA_BOOTSTRAP", raising=False)
    monkeypatch.setenv("LEDGER_DEV_MODE", "1")
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)

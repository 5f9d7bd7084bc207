"""The log level of a command: ``--log-level``, else ``LEDGER_LOG_LEVEL``, else the settings
file, else INFO; an unknown level is a clear error, not a traceback."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

import pytest

from ledger_stream.cli.common import CliError, add_common_flags, settings_from
from ledger_stream.cli.main import main

pytestmark = pytest.mark.timeout(30)


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_common_flags(parser)
    return parser.parse_args(list(argv))


def test_an_unknown_level_flag_names_the_levels(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["inspect", "--log-level", "loud", "acme/refund/r-1"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "log level must be one of DEBUG, INFO, WARNING, ERROR, CRITICAL" in err
    assert "'loud'" in err and "Traceback" not in err


def test_the_environment_sets_the_level_and_the_flag_wins(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LEDGER_LOG_LEVEL", "warning")
    settings_from(_args())
    assert logging.getLogger().level == logging.WARNING
    settings_from(_args("--log-level", "debug"))
    assert logging.getLogger().level == logging.DEBUG


def test_the_settings_file_sets_the_level(tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LEDGER_LOG_LEVEL", raising=False)
    config = tmp_path / "ledger.toml"
    config.write_text('log_level = "ERROR"\n')
    # --config is kept in LEDGER_CONFIG for the process; set here so it is undone after.
    monkeypatch.setenv("LEDGER_CONFIG", str(config))
    settings_from(_args("--config", str(config)))
    assert logging.getLogger().level == logging.ERROR


def test_an_unknown_level_in_the_environment_is_a_cli_error(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LEDGER_LOG_LEVEL", "chatty")
    with pytest.raises(CliError, match="log level must be one of"):
        settings_from(_args())

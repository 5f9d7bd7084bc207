"""Settings that loaded but did not mean what they read (found by a hostile review of the CLI,
2026-12-07), each now refused at load in one line naming the setting and where it came
from, never its value: a required action no intent can name (the approval dropped), a table
given whole and by nested keys in the environment (the nested one won without a word), a
number no later step can take, and a settings file path the system cannot look up. And the
reverse: a table setting's nested keys are never taken for a misspelling, and a refusal
names the source that gave the refused value, or every source that may have. No broker:
nothing here reaches one."""

from __future__ import annotations

from pathlib import Path

import pytest

from ledger_stream.cli.main import main
from ledger_stream.config import Settings
from ledger_stream.settings import ConfigFileError

pytestmark = pytest.mark.timeout(60)

ERROR = "ledger-stream: error: "


@pytest.fixture(autouse=True)
def no_kafka(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # --config is kept in LEDGER_CONFIG for the process: unset after each test (set first:
    # delenv of an unset name would not undo a later set).
    monkeypatch.setenv("LEDGER_CONFIG", "")
    monkeypatch.delenv("LEDGER_CONFIG")
    monkeypatch.delenv("LEDGER_KAFKA_BOOTSTRAP", raising=False)
    monkeypatch.setenv("LEDGER_DEV_MODE", "1")
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)


def _refusal(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """What ``ledger-stream ARGV`` says when it refuses its settings: one line, exit 2."""
    assert main(list(argv or ["alerts"])) == 2
    err = capsys.readouterr().err
    assert err.startswith(ERROR) and err.count("\n") == 1, err
    return err.removeprefix(ERROR).removesuffix("\n")


# 6. A settings file path the system cannot look up ---------------------------------------------

def test_a_config_path_too_long_for_the_system_is_one_line(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    """It raised OSError [Errno 36] from the file's existence check, a traceback."""
    path = "a" * 5000
    monkeypatch.setenv("LEDGER_CONFIG", path)
    with pytest.raises(ConfigFileError, match=r"^config file a{200}\.\.\. \(5000 characters\): "
                       "File name too long$"):
        Settings()
    monkeypatch.delenv("LEDGER_CONFIG")
    assert _refusal(capsys, "alerts", "--config", path) == (
        f"config file {path[:200]}... (5000 characters): File name too long")

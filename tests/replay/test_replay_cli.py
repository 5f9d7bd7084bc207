"""``ledger-stream replay-plan``'s usage errors: exit status 2 and a clear message, before
any broker is asked."""

from __future__ import annotations

import pytest

from ledger_stream.cli.main import main

GRAPH = "examples.refund_agent.upgrades:refund_v1"


def run(*argv: str) -> int:
    return main(["replay-plan", "--graph", GRAPH, "--thread", "t", *argv])


def test_a_missing_checkpointer_is_exit_2(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("LEDGER_KAFKA_BOOTSTRAP", "127.0.0.1:9")  # never reached
    assert run("--checkpointer", str(tmp_path / "none.sqlite")) == 2
    assert "no such SQLite file" in capsys.readouterr().err


@pytest.mark.parametrize("flag", [("--at", "tomorrow"), ("--limit", "0")])
def test_bad_flags_are_exit_2(tmp_path, flag, capsys):
    with pytest.raises(SystemExit) as exited:
        run("--checkpointer", str(tmp_path / "x.sqlite"), *flag)
    assert exited.value.code == 2
    assert flag[0] in capsys.readouterr().err

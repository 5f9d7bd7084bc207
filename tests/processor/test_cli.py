"""``ledger-stream processor``: its flags, each with the environment variable behind it."""

from __future__ import annotations

import pytest

from ledger_stream.cli.main import main

pytestmark = pytest.mark.timeout(30)


def test_processor_help_names_every_flag_and_its_environment(
        capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["processor", "--help"])
    assert exit_info.value.code == 0
    out = " ".join(capsys.readouterr().out.split())
    for flag, env in (("--guarantee", "LEDGER_PROCESSING_GUARANTEE"),
                      ("--group", "LEDGER_CONSUMER_GROUP"),
                      ("--instance-id", "LEDGER_PROCESSOR_INSTANCE_ID"),
                      ("--state-dir", "LEDGER_STATE_DIR"),
                      ("--metrics-port", "LEDGER_METRICS_PORT")):
        assert flag in out and env in out, flag
    assert "default exactly-once" in out
    assert "docs/processor.md" in out

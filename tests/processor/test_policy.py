"""The approval secret: refused when missing outside development mode (defect 16), before the
processor touches Kafka; the development secret only when asked for."""

from __future__ import annotations

import pytest
from pydantic import SecretStr

from ledger_stream.cli.main import main
from ledger_stream.config import Settings
from ledger_stream.processor.policy import DEV_APPROVAL_SECRET, ConfigError, approval_secret

pytestmark = pytest.mark.timeout(30)


@pytest.mark.parametrize("secret", [None, ""])
def test_no_secret_outside_dev_mode_is_refused_with_the_setting_to_use(secret: str | None):
    settings = Settings(approval_secret=None if secret is None else SecretStr(secret),
                        dev_mode=False)
    with pytest.raises(ConfigError, match="LEDGER_APPROVAL_SECRET"):
        approval_secret(settings)


def test_dev_mode_uses_the_public_development_secret():
    assert approval_secret(Settings(approval_secret=None, dev_mode=True)) == DEV_APPROVAL_SECRET


def test_a_configured_secret_is_used_even_in_dev_mode():
    for dev in (False, True):
        assert approval_secret(Settings(approval_secret=SecretStr("s3"), dev_mode=dev)) == b"s3"


def test_the_processor_command_refuses_before_connecting(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    monkeypatch.delenv("LEDGER_APPROVAL_SECRET", raising=False)
    monkeypatch.delenv("LEDGER_DEV_MODE", raising=False)
    # An address nothing answers at: the refusal must come before any connection attempt.
    code = main(["processor", "--bootstrap", "127.0.0.1:9", "--metrics-port", "off"])
    assert code != 0
    err = capsys.readouterr().err
    assert "LEDGER_APPROVAL_SECRET" in err and "Traceback" not in err

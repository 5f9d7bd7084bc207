"""Approver keys from settings: outside development mode the processor needs approver public
keys and refuses to start with only the shared secret, before it touches Kafka; the shared
(HMAC) secret is honoured in development mode only."""

from __future__ import annotations

from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from pydantic import SecretStr, ValidationError

from ledger_lab.harness.approvers import seeded_approver
from ledger_stream.cli.main import main
from ledger_stream.config import Settings
from ledger_stream.operate.approvals import public_key_text, write_keypair
from ledger_stream.processor.policy import DEV_APPROVAL_SECRET, ConfigError, approval_keys

pytestmark = pytest.mark.timeout(30)
APPROVER = seeded_approver("ops-1", "policy test")


def _settings(**given: object) -> Settings:
    base: dict[str, object] = {"approval_secret": None, "approval_keys_dir": None,
                               "approval_public_keys": None, "dev_mode": False}
    return Settings(**{**base, **given})


@pytest.mark.parametrize("secret", [None, "", "s3"])
def test_no_approver_key_outside_dev_mode_is_refused_naming_the_settings(secret: str | None):
    settings = _settings(approval_secret=None if secret is None else SecretStr(secret))
    with pytest.raises(ConfigError) as refused:
        approval_keys(settings)
    message = str(refused.value)
    assert "LEDGER_APPROVAL_KEYS_DIR" in message and "LEDGER_APPROVAL_PUBLIC_KEYS" in message
    assert "approval-keys generate" in message
    assert ("development mode only" in message) == bool(secret)


def test_the_secret_is_ignored_outside_dev_mode():
    keys = approval_keys(_settings(approval_secret=SecretStr("s3"),
                                   approval_public_keys=public_key_text(APPROVER)))
    assert keys.dev_secret is None
    assert keys.public_key("ops-1") == APPROVER.public_bytes()


def test_a_private_key_on_a_checking_host_is_warned_about(caplog: pytest.LogCaptureFixture,
                                                           tmp_path: Path):
    approval_keys(_settings(approval_public_keys=public_key_text(APPROVER),
                            approval_signing_key=tmp_path / "ops-1.key"))
    assert "keep approvers' private keys off this host" in caplog.text
    caplog.clear()  # development mode signs on one host by design: no warning there
    approval_keys(_settings(dev_mode=True, approval_signing_key=tmp_path / "ops-1.key"))
    assert "private keys off this host" not in caplog.text


def test_dev_mode_uses_the_configured_or_the_public_development_secret():
    assert approval_keys(_settings(dev_mode=True)).dev_secret == DEV_APPROVAL_SECRET
    assert approval_keys(_settings(dev_mode=True,
                                   approval_secret=SecretStr("s3"))).dev_secret == b"s3"


def test_dev_mode_with_approver_keys_never_takes_the_public_secret():
    """Approver keys say approvals matter here: an approval signed with the development
    secret, which anyone can read in the source, is then no approval."""
    with_keys = _settings(dev_mode=True, approval_public_keys=public_key_text(APPROVER))
    assert approval_keys(with_keys).dev_secret is None
    assert approval_keys(_settings(dev_mode=True, approval_secret=SecretStr("s3"),
                                   approval_public_keys=public_key_text(APPROVER))
                         ).dev_secret == b"s3"


def test_keys_come_from_the_directory_and_the_setting_with_revocations(tmp_path: Path):
    _, public = write_keypair("ops-2", tmp_path)
    (tmp_path / "ops-2.key").unlink()  # the processor's directory holds public keys only
    keys = approval_keys(_settings(approval_keys_dir=tmp_path,
                                   approval_public_keys=public_key_text(APPROVER),
                                   approval_revoked_keys=("ops-1",)))
    assert [key_id for key_id, _ in keys.public] == ["ops-1", "ops-2"]
    assert keys.revoked == {"ops-1"}


@pytest.mark.parametrize("given,says", [
    ({"approval_public_keys": "ops=not*base64"}, "not base64"),
    ({"approval_public_keys": "ops=" + "QUFB"}, "32 bytes"),
    ({"approval_public_keys": "no-equals"}, "not KEY_ID=BASE64"),
    ({"approval_keys_dir": Path("/nonexistent/keys")}, "does not exist"),
])
def test_malformed_keys_are_refused_with_a_clear_message(given: dict, says: str):
    with pytest.raises(ConfigError, match=says):
        approval_keys(_settings(**given))


def test_a_revoked_id_that_can_name_no_key_is_refused_at_load():
    """It would revoke nothing, silently; refused by the settings (the SDK's and gateway's
    too), and by the processor's keys for settings built without validation."""
    with pytest.raises(ValidationError, match="approval_revoked_keys"):
        _settings(approval_revoked_keys=("ops-1 ",))
    unchecked = _settings(approval_public_keys=public_key_text(APPROVER)).model_copy(
        update={"approval_revoked_keys": ("ops-1 ",)})
    with pytest.raises(ConfigError, match="approval key id"):
        approval_keys(unchecked)


def test_the_processor_command_refuses_before_connecting(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    for name in ("LEDGER_APPROVAL_PUBLIC_KEYS", "LEDGER_APPROVAL_KEYS_DIR", "LEDGER_DEV_MODE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LEDGER_APPROVAL_SECRET", "the-old-shared-secret")
    # An address nothing answers at: the refusal must come before any connection attempt.
    code = main(["processor", "--bootstrap", "127.0.0.1:9", "--metrics-port", "off"])
    assert code != 0
    err = capsys.readouterr().err
    assert "LEDGER_APPROVAL_KEYS_DIR" in err and "development mode only" in err
    assert "Traceback" not in err


def test_a_public_key_of_another_algorithm_is_refused(tmp_path: Path):
    """A ``.pub`` file that holds an EC key (not Ed25519): a clear refusal, not a crash."""
    other = ec.generate_private_key(ec.SECP256R1()).public_key()
    (tmp_path / "ops-ec.pub").write_bytes(other.public_bytes(
        Encoding.PEM, PublicFormat.SubjectPublicKeyInfo))
    with pytest.raises(ConfigError, match="not an Ed25519 public key"):
        approval_keys(_settings(approval_keys_dir=tmp_path))

"""``ledger-stream approval-keys generate`` and ``ledger-stream approve``: the private key is
written 0600 and never overwritten, an approval signed from it round-trips through the
processor's key loading and is accepted for its key and hash only; ``approve`` audits it
first (a real broker) and prints nothing when it cannot."""

from __future__ import annotations

import dataclasses
import json
import stat
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    NoEncryption,
    PrivateFormat,
)

from ledger_stream.cli.main import main
from ledger_stream.config import Settings
from ledger_stream.domain import events as ev
from ledger_stream.domain.approval import approval_problem
from ledger_stream.kafka.receipts import key_records
from ledger_stream.processor.policy import approval_keys
from ledger_stream.serde import AvroCodec
from tests.factories import intent

pytestmark = pytest.mark.timeout(120)
KEY = "acme/payout/p-7"


def _approve(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["approve", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_generate_then_approve_round_trips(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                          ledger_topics: Settings):
    assert ledger_topics.kafka_bootstrap
    broker = ("--bootstrap", ledger_topics.kafka_bootstrap, "--topic-prefix",
              ledger_topics.topic_prefix)
    assert main(["approval-keys", "generate", "--key-id", "ops-7", "--out",
                 str(tmp_path / "approver")]) == 0
    private, public = tmp_path / "approver" / "ops-7.key", tmp_path / "approver" / "ops-7.pub"
    assert stat.S_IMODE(private.stat().st_mode) == 0o600
    assert b"PRIVATE KEY" not in public.read_bytes()
    capsys.readouterr()
    subject = intent(key=KEY)
    code, out, err = _approve(capsys, KEY, subject.args_hash, "--signing-key", str(private),
                              "--expires-in", "120", "--operator", "ops-ann", *broker)
    assert code == 0, err
    approval = ev.Approval(**json.loads(out))
    assert approval.key_id == "ops-7"
    (audited,) = [AvroCodec().decode(r.value, (ev.AuditRecord,)) for r in key_records(
        ledger_topics.kafka_bootstrap, ledger_topics.topic("audit"), KEY)]
    assert (audited.who, audited.role, audited.action, audited.command_id) == (
        "ops-ann", "approver", ev.AuditAction.APPROVAL, approval.approval_id)
    assert subject.args_hash[:12] in audited.detail and approval.signature not in \
        repr(audited)
    # Without a ledger to audit it on, no approval is printed.
    code, out, err = _approve(capsys, KEY, subject.args_hash, "--signing-key", str(private),
                              "--bootstrap", "127.0.0.1:1")
    assert code == 2 and out == "" and "no approval printed" in err, err

    keys_dir = tmp_path / "processor-keys"
    keys_dir.mkdir()
    (keys_dir / "ops-7.pub").write_bytes(public.read_bytes())
    keys = approval_keys(Settings(approval_keys_dir=keys_dir, approval_public_keys=None,
                                  approval_secret=None, dev_mode=False))
    now = approval.expires_at_ms - 1
    assert approval_problem(dataclasses.replace(subject, approval=approval), keys, True,
                            now) is None
    other = dataclasses.replace(intent(key="acme/payout/p-8"), approval=approval)
    assert approval_problem(other, keys, True, now) == "approval signature invalid"


def test_generate_never_overwrites_a_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    assert main(["approval-keys", "generate", "--key-id", "ops-1", "--out", str(tmp_path)]) == 0
    before = (tmp_path / "ops-1.key").read_bytes()
    assert main(["approval-keys", "generate", "--key-id", "ops-1", "--out", str(tmp_path)]) == 2
    assert "exists" in capsys.readouterr().err
    assert (tmp_path / "ops-1.key").read_bytes() == before
    assert main(["approval-keys", "generate", "--key-id", "../x", "--out", str(tmp_path)]) == 2


@pytest.mark.parametrize("argv,says", [
    ([KEY, "ab" * 32], "no signing key"),
    ([KEY, "not-a-hash", "--signing-key", "/dev/null"], "is not an args hash"),
    (["not a key", "ab" * 32, "--signing-key", "/dev/null"], "not a key"),
    ([KEY, "ab" * 32, "--signing-key", "/nonexistent.key"], "cannot read the signing key"),
    ([KEY, "ab" * 32, "--signing-key", "/dev/null"], "not an unencrypted PEM private key"),
])
def test_approve_refuses_clearly(argv: list[str], says: str, monkeypatch: pytest.MonkeyPatch,
                                 capsys: pytest.CaptureFixture[str]):
    monkeypatch.delenv("LEDGER_APPROVAL_SIGNING_KEY", raising=False)
    code, out, err = _approve(capsys, *argv)
    assert code == 2 and out == "" and says in err and "Traceback" not in err


def test_approve_refuses_a_key_of_another_algorithm(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]):
    """A PEM private key that is not Ed25519 (EC here): refused by name, no traceback."""
    path = tmp_path / "ops-ec.key"
    path.write_bytes(ec.generate_private_key(ec.SECP256R1()).private_bytes(
        Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()))
    code, out, err = _approve(capsys, KEY, "ab" * 32, "--signing-key", str(path))
    assert code == 2 and out == "" and "not an Ed25519 key" in err and "Traceback" not in err


@pytest.mark.parametrize("expires_in", ["inf", "nan", "1e300", "0"])
def test_approve_refuses_an_expiry_no_approval_can_carry(expires_in: str, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]):
    assert main(["approval-keys", "generate", "--key-id", "ops-1", "--out", str(tmp_path)]) == 0
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_:  # argparse refuses it at the flag
        _approve(capsys, KEY, "ab" * 32, "--signing-key", str(tmp_path / "ops-1.key"),
                 "--expires-in", expires_in)
    out, err = capsys.readouterr()
    assert exit_.value.code == 2 and out == "" and "argument --expires-in:" in err, err
    assert "Traceback" not in err

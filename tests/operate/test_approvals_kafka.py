"""Approvals end to end on the real broker: a processor configured with approver public keys
only. Whatever a process holding the processor's whole configuration (its settings, its
environment, its keys directory, the old shared secret still set) can sign is rejected with
an ``approval_mismatch`` alert, as are a revoked and an unknown key; the approval that
``ledger-stream approve`` signs with the approver's private key is accepted."""

from __future__ import annotations

import hashlib
import json
import shutil
import uuid
from pathlib import Path

import pytest

from ledger_lab.harness.sandbox import SandboxProc
from ledger_lab.harness.stack import Stack
from ledger_stream import LedgerClient, Workflow, operation_key
from ledger_stream.cli.main import main
from ledger_stream.config import Settings
from ledger_stream.domain import events as ev
from ledger_stream.domain.approval import ApprovalSigner, sign_approval, sign_dev_approval
from ledger_stream.kafka.receipts import key_records
from ledger_stream.operate.approvals import load_signer, write_keypair
from ledger_stream.processor.policy import DEV_APPROVAL_SECRET
from ledger_stream.serde import AvroCodec
from tests.processor.support import read_topic

pytestmark = pytest.mark.timeout(240)

ARGS = {"invoice": "inv-9", "amount": 99.0, "currency": "EUR"}
WORKFLOW = Workflow("refund-agent", "1.0", "thread-1", "refund")
OLD_SECRET = "the-old-shared-secret"


def _forgeries(keys_dir: Path, key: str, digest: str, expires: int) -> dict[str, ev.Approval]:
    """Every approval one can sign from what the processor holds."""
    public = (keys_dir / "ops-1.pub").read_bytes()
    seeds = {"public key file": public, "old secret": OLD_SECRET.encode(),
             "development secret": DEV_APPROVAL_SECRET}
    forged = {f"ed25519 seeded by the {name}": sign_approval(
        ApprovalSigner.from_seed("ops-1", hashlib.sha256(seed).digest()), key, "ap-f", digest,
        "", expires) for name, seed in seeds.items()}
    forged["hmac with the old secret"] = sign_dev_approval(OLD_SECRET.encode(), key, "ap-h",
                                                           digest, "", expires)
    forged["hmac with the development secret"] = sign_dev_approval(
        DEV_APPROVAL_SECRET, key, "ap-d", digest, "", expires)
    return forged


def test_only_the_approvers_private_key_approves(ledger_topics: Settings, tmp_path: Path,
                                                 sandbox: SandboxProc,
                                                 capsys: pytest.CaptureFixture[str],
                                                 monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("LEDGER_APPROVAL_SIGNING_KEY", raising=False)
    approver, keys_dir = tmp_path / "approver", tmp_path / "processor-keys"
    keys_dir.mkdir()
    for key_id in ("ops-0", "ops-1"):  # ops-0: the key rotated out and revoked
        write_keypair(key_id, approver)
        shutil.copy(approver / f"{key_id}.pub", keys_dir)
    write_keypair("ops-9", approver)  # never distributed: unknown to the processor
    stack = Stack(ledger_topics, tmp_path, processor_env={
        "LEDGER_APPROVAL_REQUIRED_ACTIONS": '["payout"]', "LEDGER_APPROVAL_KEYS_DIR":
        str(keys_dir), "LEDGER_APPROVAL_PUBLIC_KEYS": "", "LEDGER_APPROVAL_SECRET": OLD_SECRET,
        "LEDGER_APPROVAL_REVOKED_KEYS": '["ops-0"]'})
    stack.connector("http", "--name", "payments", "--base-url", sandbox.url, "--deduplicates")
    try:
        with LedgerClient(ledger_topics) as client:
            key = operation_key("acme", "payout", uuid.uuid4().hex[:8])
            pending = client.intent(key, "payout", "payments", ARGS, workflow=WORKFLOW)
            assert client.submit(pending, raise_errors=False).reason is ev.Reason.APPROVAL
            # The agent swaps in other arguments: its intent is now the key's latest. An
            # approver asking the ledger what waits is shown that hash; nothing is signed,
            # so no signing key is needed to ask (docs/commands.md).
            swapped = client.intent(key, "payout", "payments", {**ARGS, "amount": 9999.0},
                                    workflow=WORKFLOW)
            assert client.submit(swapped, raise_errors=False).reason is ev.Reason.APPROVAL
            code = main(["approve", key, "--bootstrap", stack.bootstrap,
                         "--topic-prefix", ledger_topics.topic_prefix])
            shown = capsys.readouterr()
            assert (code, shown.out) == (2, "")
            assert f"approve {key} {swapped.args_hash}" in shown.err
            expires = pending.at_ms + 600_000
            refused = _forgeries(keys_dir, key, pending.args_hash, expires)
            for key_id in ("ops-0", "ops-9"):
                signer = load_signer(approver / f"{key_id}.key")
                refused[key_id] = sign_approval(signer, key, "ap-r", pending.args_hash, "",
                                                expires)
            for name, approval in refused.items():
                attempt = client.intent(key, "payout", "payments", ARGS, workflow=WORKFLOW,
                                        approval=approval)
                answer = client.submit(attempt, raise_errors=False)
                assert (answer.status, answer.reason) == (
                    ev.ReceiptStatus.REJECTED, ev.Reason.APPROVAL), name
            assert sandbox.effects(key) == []

            # Its latest receipt is a forged approval's rejection: that waits for nothing.
            assert main(["approve", key, "--signing-key", str(approver / "ops-1.key"),
                         "--bootstrap", stack.bootstrap,
                         "--topic-prefix", ledger_topics.topic_prefix]) == 2
            assert "is not waiting for an approval" in capsys.readouterr().err
            # The approver names the hash of the arguments checked.
            code = main(["approve", key, pending.args_hash,
                         "--signing-key", str(approver / "ops-1.key"),
                         "--expires-in", "600", "--bootstrap", stack.bootstrap,
                         "--topic-prefix", ledger_topics.topic_prefix])
            assert code == 0
            approval = ev.Approval(**json.loads(capsys.readouterr().out))
            assert (approval.key_id, approval.payload_hash) == ("ops-1", pending.args_hash)
            # Audited before it was printed: who, as an approver, with which key.
            (audited,) = [AvroCodec().decode(r.value, (ev.AuditRecord,)) for r in key_records(
                stack.bootstrap, ledger_topics.topic("audit"), key)]
            assert (audited.role, audited.action, audited.command_id) == (
                "approver", ev.AuditAction.APPROVAL, approval.approval_id)
            assert audited.credential.endswith("approval-key:ops-1")
            approved = client.intent(key, "payout", "payments", ARGS, workflow=WORKFLOW,
                                     approval=approval)
            assert client.submit(approved).status is ev.ReceiptStatus.SUCCEEDED
            assert len(sandbox.effects(key)) == 1
        details = [a.detail for a in read_topic(
            stack.bootstrap, ledger_topics.topic("alerts"), timeout_s=30,
            until=lambda rs: sum(a.key == key for a in rs) >= len(refused) + 2)
            if a.key == key and a.kind is ev.AlertKind.APPROVAL_MISMATCH]
        assert sorted(details) == sorted(
            ["approval missing"] * 2 + ["approval signature invalid"] * 3
            + ["approval has no key id (a development-mode approval)"] * 2
            + ["approval key 'ops-0' revoked", "approval key 'ops-9' unknown"])
    finally:
        stack.close()


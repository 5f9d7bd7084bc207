"""Approver keys: only a trusted, unrevoked Ed25519 key's signature approves; what a verifier
holds (public keys, a development secret) cannot approve."""

from __future__ import annotations

import dataclasses
import hashlib
import hmac

import pytest

from ledger_lab.harness.approvers import seeded_approver, trusted
from ledger_stream.domain import Policy, absent, decide
from ledger_stream.domain import events as ev
from ledger_stream.domain.approval import (
    ApprovalKeys,
    InvalidApprovalKey,
    approval_problem,
    sign_approval,
    sign_dev_approval,
)
from ledger_stream.domain.state import Phase
from tests.factories import KEY, intent

OLD, NEW = seeded_approver("ops-2025", "old"), seeded_approver("ops-2026", "new")
STRANGER = seeded_approver("ops-x", "stranger")


def _decided(keys: ApprovalKeys, approval: ev.Approval | None) -> tuple[Phase, list[str]]:
    """The key's phase after the intent, and the details of its approval_mismatch alerts."""
    policy = Policy(approval_required_actions=frozenset({"refund"}), approval_keys=keys)
    decision = decide(absent(KEY), intent(approval=approval), policy, 1_000)
    alerts = [o.detail for o in decision.outputs if isinstance(o, ev.Alert)
              and o.kind is ev.AlertKind.APPROVAL_MISMATCH]
    rejected = [o for o in decision.outputs if isinstance(o, ev.Receipt)
                and o.reason is ev.Reason.APPROVAL]
    assert bool(alerts) == bool(rejected)
    return decision.state.phase, alerts


def _signed(signer=NEW, **changes):
    approval = sign_approval(signer, KEY, "ap-1", intent().args_hash, "", 10_000)
    return dataclasses.replace(approval, **changes)


def test_several_keys_are_trusted_at_once_while_rotating():
    keys = trusted(OLD, NEW)
    assert _decided(keys, _signed(OLD)) == (Phase.RESERVED, [])
    assert _decided(keys, _signed(NEW)) == (Phase.RESERVED, [])


def test_a_revoked_key_is_refused_with_an_alert_even_while_still_listed():
    keys = trusted(OLD, NEW, revoked=frozenset({"ops-2025"}))
    assert _decided(keys, _signed(OLD)) == (Phase.ABSENT, ["approval key 'ops-2025' revoked"])
    assert _decided(keys, _signed(NEW)) == (Phase.RESERVED, [])


def test_an_unknown_key_id_is_refused_with_an_alert():
    assert _decided(trusted(NEW), _signed(STRANGER)) == (
        Phase.ABSENT, ["approval key 'ops-x' unknown"])


def test_a_signature_relabelled_with_another_trusted_key_id_is_invalid():
    moved = _signed(OLD, key_id="ops-2026")
    assert _decided(trusted(OLD, NEW), moved) == (Phase.ABSENT, ["approval signature invalid"])


def test_a_key_id_that_is_no_valid_id_is_not_quoted_in_the_alert():
    odd = _signed(NEW, key_id="x\n" * 100)
    _, (detail,) = _decided(trusted(NEW), odd)
    assert detail == "approval key (invalid id, 200 chars) unknown"


@pytest.mark.parametrize("signature", ["", "zz", "ab" * 64, "ab" * 10, "\u00e9" * 128])
def test_a_malformed_signature_is_refused_not_raised(signature):
    assert approval_problem(intent(approval=_signed(signature=signature)), trusted(NEW), True,
                            1_000) == "approval signature invalid"


def test_a_development_approval_needs_the_development_secret():
    """Outside development mode a policy has no secret: an HMAC approval signed with any
    secret, the old shared one included, is refused."""
    dev = sign_dev_approval(b"shared", KEY, "ap-1", intent().args_hash, "", 10_000)
    assert _decided(trusted(NEW), dev) == (
        Phase.ABSENT, ["approval has no key id (a development-mode approval)"])
    in_dev_mode = ApprovalKeys(dev_secret=b"shared")
    assert _decided(in_dev_mode, dev) == (Phase.RESERVED, [])
    assert _decided(ApprovalKeys(dev_secret=b"other"), dev)[0] is Phase.ABSENT


def test_the_default_policy_trusts_no_approver():
    assert _decided(Policy().approval_keys, _signed(NEW)) == (
        Phase.ABSENT, ["approval key 'ops-2026' unknown"])


def test_key_material_is_checked_when_the_keys_are_built():
    with pytest.raises(InvalidApprovalKey, match="32 bytes"):
        ApprovalKeys.of({"ops": b"short"})
    with pytest.raises(InvalidApprovalKey, match="approval key id"):
        ApprovalKeys.of({"../etc": bytes(32)})


def test_an_approval_for_one_key_cannot_be_moved_to_another_by_line_breaks():
    """The signed text is its fields one per line: a key holding a line break could shift
    its tail into the approval id and so name another key with the same bytes. A line break
    in any signed field is refused, when signing and when checking."""
    odd_key = f"{KEY}\nb"
    with pytest.raises(ValueError, match="line break"):
        sign_approval(NEW, odd_key, "c", intent().args_hash, "", 10_000)
    # What such a signature would be, had an approver made it: sign the same bytes directly.
    text = "\n".join(("ledger-approval-v2", "ops-2026", KEY, "b", "c",
                      intent().args_hash, "", "10000")).encode()
    moved = ev.Approval("b\nc", intent().args_hash, "", 10_000,
                        NEW.private_key.sign(text).hex(), "ops-2026")
    assert _decided(trusted(NEW), moved) == (
        Phase.ABSENT, ["approval field holds a line break"])
    with pytest.raises(ValueError, match="line break"):
        sign_dev_approval(b"shared", odd_key, "c", intent().args_hash, "", 10_000)
    dev_text = "\n".join(("ledger-approval-v1", KEY, "b", "c", intent().args_hash, "",
                          "10000")).encode()
    dev_moved = ev.Approval("b\nc", intent().args_hash, "", 10_000,
                            hmac.new(b"shared", dev_text, hashlib.sha256).hexdigest())
    assert _decided(ApprovalKeys(dev_secret=b"shared"), dev_moved) == (
        Phase.ABSENT, ["approval field holds a line break"])


def test_a_key_id_with_a_trailing_line_break_is_no_key_id():
    with pytest.raises(InvalidApprovalKey, match="approval key id"):
        ApprovalKeys.of({"ops\n": bytes(32)})

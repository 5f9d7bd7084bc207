"""The policy's revision (``ledger_decision_policy_info{revision}``) covers every knob that
decides an action's fate: changing any one field of Policy (the approver keys and the
revision itself aside) or of one action's rules changes it. The knobs are read from the
dataclasses, so a knob added later without a changed revision fails here (or the helper
below asks to be taught its type)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields, replace
from enum import Enum

import pytest

from ledger_stream.config import Settings
from ledger_stream.domain.policy import ActionRules, Policy
from ledger_stream.processor.policy import policy_from, policy_revision

NOT_DECIDING = {"approval_keys", "revision"}  # keys rotate; the digest cannot hold itself
RULED = {"refund": ActionRules()}


def _changed(value: object) -> object:
    """Another value of ``value``'s type."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, Enum):
        return next(member for member in type(value) if member is not value)
    if isinstance(value, int):
        return value + 1
    if isinstance(value, frozenset):
        return value | {"payout"}
    if isinstance(value, Mapping):
        return {**value, "payout": ActionRules(max_attempts=1)}
    raise AssertionError(f"teach _changed a {type(value).__name__} knob")


@pytest.mark.parametrize("knob", [f.name for f in fields(Policy)
                                  if f.name not in NOT_DECIDING])
def test_each_ledger_wide_knob_changes_the_revision(knob: str) -> None:
    base = replace(policy_from(Settings()), actions=RULED)
    changed = replace(base, **{knob: _changed(getattr(base, knob))})
    assert policy_revision(changed) != policy_revision(base)
    assert policy_revision(replace(base)) == policy_revision(base)


@pytest.mark.parametrize("knob", [f.name for f in fields(ActionRules)])
def test_each_action_rule_changes_the_revision(knob: str) -> None:
    base = replace(policy_from(Settings()), actions=RULED)
    rules = RULED["refund"]
    value = getattr(rules, knob)
    changed = replace(base, actions={"refund": replace(
        rules, **{knob: 1 if value is None else _changed(value)})})
    assert policy_revision(changed) != policy_revision(base)


@pytest.mark.parametrize("setting", ["clock_skew_ms", "stall_after_ms",
                                     "reconcile_timeout_ms", "lag_credit_ms"])
def test_processors_apart_in_a_timing_knob_report_apart(setting: str) -> None:
    """Two processors whose settings differ in one timing knob decide stalls, skew,
    reconciliations and lag apart: their revisions differ."""
    base = policy_from(Settings())
    other = policy_from(Settings(**{setting: getattr(base, setting) + 1000}))
    assert other.revision != base.revision


def test_which_approvals_count_changes_the_revision_but_no_secret_is_in_it() -> None:
    """A revoked approver key refuses its approvals and development mode accepts HMAC
    ones: two processors apart in either decide approvals apart, so their revisions differ.
    The development secret's value is never part of what is digested."""
    from ledger_stream.domain.approval import ApprovalKeys
    from ledger_stream.processor.policy import policy_knobs

    base = policy_from(Settings())
    revoked = replace(base, approval_keys=ApprovalKeys.of({}, frozenset({"ann-2025"})))
    dev = replace(base, approval_keys=ApprovalKeys(dev_secret=b"s3cret-one"))
    other_dev = replace(base, approval_keys=ApprovalKeys(dev_secret=b"s3cret-two"))
    assert len({policy_revision(p) for p in (base, revoked, dev)}) == 3
    assert policy_revision(dev) == policy_revision(other_dev)
    assert "s3cret" not in str(policy_knobs(dev))

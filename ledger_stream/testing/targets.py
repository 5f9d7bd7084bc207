"""The contract every Target passes, as pytest test cases: prove your own connector with it.

Subclass ``TargetContract`` (or ``DeduplicatingTargetContract`` when your system refuses a
second effect for one key itself) in a test module named ``test_*.py``, in a class named
``Test*``, and provide:

- a fixture ``target``: a ready Target on a fresh system (or fresh keys);
- a fixture ``unreachable``: the same kind of Target pointed where nothing answers (a
  closed port); its ``apply`` must fail as NOT_APPLIED and its ``lookup`` must raise
  ``LookupUnavailable``;
- a method ``effects(target, key)``: how many effects the system itself holds for ``key``
  (read from the system, not from the Target);
- ``queryable = False`` when the system has no lookup API (``lookup`` always raises
  ``LookupUnavailable``).

Every case builds its own keys, so the cases share a system without interfering.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from ledger_stream.connector.target import EffectRequest, LookupUnavailable, Target
from ledger_stream.domain.events import OutcomeStatus
from ledger_stream.domain.keys import args_hash


def effect_request(key: str | None = None, args: dict[str, Any] | None = None,
                   attempt: int = 1) -> EffectRequest:
    """An EffectRequest as the connector runtime builds it: a fresh key unless given, a new
    attempt id every time, the arguments' real hash."""
    key = key or f"acme/contract/{uuid.uuid4().hex[:10]}"
    args = args if args is not None else {"amount": 100, "to": "cust-1",
                                          "email": "cust-1@example.test"}
    return EffectRequest(key, attempt, uuid.uuid4().hex, "contract", args, args_hash(args),
                         {"text": "hello"})


# The name this repository's tests knew it by.
request = effect_request


class TargetContract:
    """The cases every Target passes (the module docstring says what a subclass provides)."""

    queryable = True  # False for targets without a lookup API (SMTP)

    def effects(self, target: Target, key: str) -> int:
        raise NotImplementedError

    def test_apply_returns_a_receipt_id_and_makes_one_effect(self, target: Target):
        req = effect_request()
        receipt = target.apply(req, timeout_s=5)
        assert isinstance(receipt, str) and receipt
        assert self.effects(target, req.key) == 1

    def test_second_apply_with_the_same_key(self, target: Target):
        req = effect_request()
        first = target.apply(req, timeout_s=5)
        if target.deduplicates:  # DeduplicatingTargetContract asserts the flag is honest
            again = target.apply(effect_request(req.key, req.args, attempt=2), timeout_s=5)
            assert again == first
            assert self.effects(target, req.key) == 1
        else:
            # No native deduplication: the ledger's grant is the only fence (documented).
            target.apply(effect_request(req.key, req.args, attempt=2), timeout_s=5)
            assert self.effects(target, req.key) == 2

    def test_lookup_finds_the_effect_by_key(self, target: Target):
        req = effect_request()
        receipt = target.apply(req, timeout_s=5)
        if not self.queryable:
            with pytest.raises(LookupUnavailable):
                target.lookup(req.key, timeout_s=5)
            return
        assert target.lookup(req.key, timeout_s=5) == receipt
        assert target.lookup(f"{req.key}-absent", timeout_s=5) is None

    def test_unreachable_target_is_not_applied_and_lookup_unavailable(self, unreachable: Target):
        with pytest.raises(Exception) as raised:
            unreachable.apply(effect_request(), timeout_s=2)
        assert unreachable.classify(raised.value) is OutcomeStatus.NOT_APPLIED
        with pytest.raises(LookupUnavailable):
            unreachable.lookup("acme/contract/x", timeout_s=2)


class DeduplicatingTargetContract(TargetContract):
    """The contract of targets that fence duplicates by key themselves."""

    def test_declares_deduplication(self, target: Target):
        assert target.deduplicates

    def test_same_key_other_arguments_is_refused_by_a_deduplicating_target(self, target: Target):
        req = effect_request()
        target.apply(req, timeout_s=5)
        with pytest.raises(Exception) as raised:
            target.apply(effect_request(req.key, {"amount": 999, "to": "x", "email": "x@e.test"}),
                         timeout_s=5)
        assert target.classify(raised.value) is OutcomeStatus.FAILED
        assert self.effects(target, req.key) == 1

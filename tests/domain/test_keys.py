"""Operation keys, canonical JSON and the validation of decoded events."""

from __future__ import annotations

from decimal import Decimal

import pytest

from ledger_stream.domain.keys import (
    InvalidKeyError,
    args_hash,
    business_id_part,
    canonical_json,
)
from ledger_stream.domain.validation import invalid_reason
from tests.factories import intent

pytestmark = pytest.mark.timeout(30)


def test_equal_amounts_have_one_canonical_form():
    forms = [{"amount": 10}, {"amount": 10.0}, {"amount": Decimal("10.00")}]
    assert {canonical_json(f) for f in forms} == {'{"amount":10}'}
    assert canonical_json(0.1) == canonical_json(Decimal("0.10")) == "0.1"


def test_decimals_are_never_rounded_through_float():
    exact = Decimal("0.1000000000000000055511151231257827")
    assert canonical_json(exact) == "0.1000000000000000055511151231257827"
    assert args_hash({"a": exact}) != args_hash({"a": 0.1})
    assert canonical_json(Decimal("12345678901234567890.123456789")) == \
        "12345678901234567890.123456789"


def test_integer_and_string_object_keys_do_not_collide():
    with pytest.raises(TypeError, match="keys must be strings"):
        canonical_json({1: "x"})
    assert canonical_json({"1": "x"}) == '{"1":"x"}'


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), Decimal("NaN"), Decimal("-Inf")])
def test_non_finite_numbers_have_no_canonical_form(bad):
    with pytest.raises(ValueError):
        canonical_json({"amount": bad})


def test_canonical_json_sorts_keys_and_keeps_unicode():
    assert canonical_json({"b": [1, {"z": None, "a": True}], "a": "é"}) == \
        '{"a":"é","b":[1,{"a":true,"z":null}]}'


def test_an_intent_whose_action_differs_from_its_key_is_invalid():
    sneaky = intent(key="acme/payout/p1", action="note")
    assert invalid_reason(sneaky, "acme/payout/p1") == \
        "the intent's action differs from its operation key's action"
    assert invalid_reason(intent(key="acme/payout/p1"), "acme/payout/p1") is None


@pytest.mark.parametrize("key", ["acme", "acme/payout", "acme//p1", "/payout/p1"])
def test_an_intent_key_must_be_tenant_action_business_id(key):
    assert invalid_reason(intent(key=key, tenant="acme", action="payout"), key) == \
        "the operation key is not tenant/action/business-id"


@pytest.mark.parametrize("change,message_key,reason", [
    ({"key": ""}, "", "empty operation key"),
    ({}, "acme/refund/other", "message key differs from the event's operation key"),
    ({"at_ms": 0}, None, "at_ms must be a positive epoch-millisecond time"),
    ({"event_id": ""}, None, "empty event_id"),
    ({"tenant": "other"}, None, "the operation key is not scoped by the intent's tenant"),
    ({"args_hash": "0" * 64}, None, "args_hash is not the SHA-256 of args_json"),
    ({"target": ""}, None, "empty target"),
    ({"target": "smtp\n"}, None, "the target must be at most 255 printable characters"),
    ({"target": "pay\x00ments"}, None, "the target must be at most 255 printable characters"),
    ({"target": "t" * 256}, None, "the target must be at most 255 printable characters"),
    ({"workflow": __import__("ledger_stream.domain.events", fromlist=["Workflow"])
      .Workflow("", "1.0")}, None, "workflow graph and version are required"),
    ({"workflow": __import__("ledger_stream.domain.events", fromlist=["Workflow"])
      .Workflow("g", "")}, None, "workflow graph and version are required"),
])
def test_each_invalid_intent_says_which_rule_it_broke(change, message_key, reason):
    from dataclasses import replace

    bad = replace(intent(), **change)
    assert invalid_reason(bad, bad.key if message_key is None else message_key) == reason
    assert invalid_reason(intent(), None) is None  # no message key: nothing to compare


@pytest.mark.parametrize("change,reason", [
    ({"attempt": 0}, "attempt numbers start at 1"),
    ({"lease_ms": 0}, "lease_ms must be positive and at most 86400000 (a day)"),
    ({"lease_ms": 86_400_001}, "lease_ms must be positive and at most 86400000 (a day)"),
    ({"lease_ms": 2**63 - 1}, "lease_ms must be positive and at most 86400000 (a day)"),
    ({"at_ms": -5}, "at_ms must be a positive epoch-millisecond time"),
])
def test_each_invalid_claim_says_which_rule_it_broke(change, reason):
    from dataclasses import replace

    from tests.factories import claim

    good = claim()
    assert invalid_reason(good, good.key) is None
    assert invalid_reason(replace(good, **change), good.key) == reason


@pytest.mark.parametrize("target", ["smtp", "payments api", "t" * 255, "caf\u00e9-eu"])
def test_a_target_a_connector_can_be_named_is_valid(target):
    from dataclasses import replace

    assert invalid_reason(replace(intent(), target=target), None) is None


def test_the_tenant_is_the_first_segment_of_the_key():
    from ledger_stream.domain.keys import tenant_of

    assert tenant_of("acme/refund/inv-1") == "acme"
    assert tenant_of("acme") == "acme"


def test_operation_keys_join_tenant_action_and_business_ids():
    from ledger_stream.domain.keys import operation_key

    assert operation_key("acme", "refund", "inv-1", 7) == "acme/refund/inv-1/7"


@pytest.mark.parametrize("parts,says", [
    (("acme", "refund"), "an operation key needs at least one business id"),
    (("acme", "", "x"), "invalid operation key part ''"),
    (("acme", "refund", "a/b"), "invalid operation key part 'a/b'"),
    (("acme", "refund", "a\nb"), "invalid operation key part 'a\\nb'"),
    (("ac\x00me", "refund", "x"), "invalid operation key part 'ac\\x00me'"),
])
def test_an_operation_key_part_that_could_collide_is_refused(parts, says):
    from ledger_stream.domain.keys import InvalidKeyError, operation_key

    with pytest.raises(InvalidKeyError) as raised:
        operation_key(*parts)
    assert str(raised.value) == says


def test_canonical_json_keeps_non_ascii_text_and_keys_as_they_are():
    assert canonical_json({"é": "ü"}) == '{"é":"ü"}'


def test_canonical_numbers_never_use_an_exponent():
    assert canonical_json([Decimal("1.5E-7"), Decimal("2.50"), 1e-7]) == \
        "[0.00000015,2.5,0.0000001]"


@pytest.mark.parametrize("value,says", [
    (float("nan"), "material arguments must not contain NaN or infinity"),
    (Decimal("Infinity"), "material arguments must not contain NaN or infinity"),
])
def test_non_finite_numbers_say_why(value, says):
    with pytest.raises(ValueError) as raised:
        canonical_json(value)
    assert str(raised.value) == says


def test_non_json_values_say_which_type_and_string_keys_are_required():
    with pytest.raises(TypeError) as raised:
        canonical_json({"when": object()})
    assert str(raised.value) == "material arguments must be JSON values, not object"
    with pytest.raises(TypeError) as raised:
        canonical_json({(1, 2): "x"})
    assert str(raised.value) == "material argument object keys must be strings"


def test_the_approval_signature_is_ed25519_over_the_documented_text():
    """A known answer: approvers and the ledger must agree byte for byte, and the signed
    text names the key id."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    from ledger_lab.harness.approvers import seeded_approver
    from ledger_stream.domain.approval import sign_approval

    signer = seeded_approver("ops-2026", "known answer")
    approval = sign_approval(signer, "acme/payout/p1", "ap-1", "ab" * 32, "rev-3", 1234)
    text = "\n".join(("ledger-approval-v2", "ops-2026", "acme/payout/p1", "ap-1", "ab" * 32,
                      "rev-3", "1234")).encode("utf-8")
    Ed25519PublicKey.from_public_bytes(signer.public_bytes()).verify(
        bytes.fromhex(approval.signature), text)  # raises when it differs
    assert (approval.approval_id, approval.payload_hash, approval.policy_revision,
            approval.expires_at_ms, approval.key_id) == ("ap-1", "ab" * 32, "rev-3", 1234,
                                                         "ops-2026")


def test_the_development_approval_is_an_hmac_over_the_documented_text():
    import hashlib
    import hmac

    from ledger_stream.domain.approval import sign_dev_approval

    approval = sign_dev_approval(b"secret", "acme/payout/p1", "ap-1", "ab" * 32, "rev-3", 1234)
    text = "\n".join(("ledger-approval-v1", "acme/payout/p1", "ap-1", "ab" * 32, "rev-3",
                      "1234")).encode("utf-8")
    assert approval.signature == hmac.new(b"secret", text, hashlib.sha256).hexdigest()
    assert approval.key_id == ""


@pytest.mark.parametrize("case,says", [
    ("payload", "approval payload hash differs from the intent's args hash"),
    ("revision", "approval policy revision differs from the intent's"),
    ("expired", "approval expired"),
    ("at expiry", "approval expired"),
    ("no revision asked", None),
    ("valid", None),
])
def test_each_approval_problem_is_named(case, says):
    from ledger_lab.harness.approvers import seeded_approver, trusted
    from ledger_stream.domain.approval import approval_problem, sign_approval

    signer = seeded_approver("approver-1", "k")
    base = intent(key="acme/payout/p1", policy_revision="rev-1")
    payload = "0" * 64 if case == "payload" else base.args_hash
    revision = "rev-0" if case in ("revision", "no revision asked") else "rev-1"
    approval = sign_approval(signer, base.key, "ap", payload, revision, 10_000)
    subject = intent(key="acme/payout/p1", approval=approval,
                     policy_revision="" if case == "no revision asked" else "rev-1")
    now = {"expired": 10_001, "at expiry": 10_000}.get(case, 9_999)
    assert approval_problem(subject, trusted(signer), True, now) == says


@pytest.mark.parametrize("at_ms,lease_ms,valid", [(1, 1, True), (0, 1, False),
                                                  (1, 0, False)])
def test_the_smallest_valid_times_and_leases_are_one_millisecond(at_ms, lease_ms, valid):
    from tests.factories import claim

    event = claim(at_ms=at_ms, lease_ms=lease_ms)
    assert (invalid_reason(event, event.key) is None) is valid


def test_a_key_part_that_is_not_valid_unicode_is_refused():
    from ledger_stream.domain.keys import InvalidKeyError, operation_key

    with pytest.raises(InvalidKeyError, match="not valid Unicode"):
        operation_key("acme", "refund", "inv-\ud800")  # a lone surrogate has no UTF-8


def test_a_business_id_written_differently_is_one_key_part():
    """The spellings a regenerated model answer may use for one id meet one key part."""
    composed, decomposed = "inv-caf\u00e9", "inv-cafe\u0301"
    assert composed != decomposed
    assert business_id_part(composed) == business_id_part(decomposed) == composed
    assert business_id_part(42) == business_id_part("42") == business_id_part(" 42\n") == "42"


@pytest.mark.parametrize("value", [42.0, 1.5, True, None, {"id": 1}, ["inv-1"]])
def test_a_business_id_that_is_not_text_or_an_integer_is_refused(value):
    """42.0 would be a second key beside 42; a bool, an object or a list is no id."""
    with pytest.raises(InvalidKeyError, match="a business id is text or an integer"):
        business_id_part(value)

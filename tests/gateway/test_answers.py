"""What each answer says, on the real broker, processor, HTTP connector and payments sandbox,
through curl: the key's ``state`` first, then what the request got (``answer``). A request
refused on a settled key never makes the key read as refused, and a conflict's answer never
names the arguments the key holds, not even their hash."""

from __future__ import annotations

import json

import pytest

from ledger_lab.harness.sandbox import SandboxProc
from tests.gateway.support import ACME, curl, intent, new_key

pytestmark = pytest.mark.timeout(240)


def test_created_already_done_rejected_and_the_key_stays_succeeded(
        gateway: str, sandbox: SandboxProc) -> None:
    key = new_key()
    code, first = curl("POST", f"{gateway}/v1/intents", ACME, intent(key))
    assert code == 200, first
    made = first["operation"]
    assert (made["state"], made["answer"], made["status"]) == (
        "succeeded", "created", "succeeded")
    assert made["effect_intent_id"] == made["intent_event_id"] == first["intent_event_id"]
    assert list(made)[:3] == ["key", "state", "answer"]  # the state leads

    code, again = curl("POST", f"{gateway}/v1/intents", ACME, intent(key))
    repeat = again["operation"]
    assert code == 200 and (repeat["state"], repeat["answer"]) == ("succeeded", "already_done")
    # The original outcome, and which intent made it.
    assert repeat["external_id"] == made["external_id"]
    assert repeat["effect_intent_id"] == first["intent_event_id"]
    assert repeat["intent_event_id"] == again["intent_event_id"] != first["intent_event_id"]

    code, other = curl("POST", f"{gateway}/v1/intents", ACME, intent(key, amount=1))
    refused = other["operation"]
    assert code == 200 and (refused["state"], refused["answer"], refused["reason"]) == (
        "succeeded", "rejected", "conflict")
    assert refused["resolved"] is True
    assert first["args_hash"] not in json.dumps(other)  # the held arguments' hash
    assert other["args_hash"] != first["args_hash"]  # only its own
    assert refused["detail"] == "the key holds other arguments"

    # A read: the key succeeded; the latest request the ledger answered was refused.
    code, now = curl("GET", f"{gateway}/v1/operations/{key}", ACME)
    assert code == 200, now
    assert (now["state"], now["status"], now["key_status"], now["resolved"]) == (
        "succeeded", "succeeded", "succeeded", True)
    assert (now["answer"], now["reason"], now["intent_event_id"]) == (
        "rejected", "conflict", other["intent_event_id"])
    assert now["external_id"] == made["external_id"]
    assert first["args_hash"] not in json.dumps(now)
    assert len(sandbox.effects(key)) == 1


def test_a_frozen_action_answers_held_then_pays_once_unfrozen(
        gateway: str, sandbox: SandboxProc) -> None:
    code, frozen = curl("POST", f"{gateway}/v1/freezes?wait=20", ACME,
                        {"action": "refund", "reason": "INC-35"})
    assert code == 201 and frozen["in_force"], frozen
    key = new_key()
    code, answer = curl("POST", f"{gateway}/v1/intents", ACME, intent(key, wait=10))
    held = answer["operation"]
    assert code == 200 and (held["state"], held["answer"], held["reason"]) == (
        "held", "held", "frozen")
    assert held["resolved"] is False
    code, now = curl("GET", f"{gateway}/v1/operations/{key}", ACME)
    assert code == 200 and (now["state"], now["answer"]) == ("held", "held")
    assert sandbox.effects(key) == []

    code, _ = curl("DELETE", f"{gateway}/v1/freezes/refund?wait=20", ACME)
    assert code == 200
    code, again = curl("POST", f"{gateway}/v1/intents", ACME, intent(key, wait=30))
    # Released: the held intent's effect is made; this repeat gets it as already done.
    assert code == 200 and (again["operation"]["state"], again["operation"]["answer"]) == (
        "succeeded", "already_done"), again
    assert again["operation"]["effect_intent_id"] == answer["intent_event_id"]
    assert len(sandbox.effects(key)) == 1

"""Building intents in the SDK: a mistake the ledger would dead-letter is refused at once."""

from __future__ import annotations

import pytest

from ledger_stream.config import Settings
from ledger_stream.domain import events as ev
from ledger_stream.sdk import InvalidIntentError, LedgerClient

pytestmark = pytest.mark.timeout(30)

WORKFLOW = ev.Workflow("refund-agent", "1.0")


@pytest.fixture
def client():
    # No broker is contacted: building an intent is local.
    c = LedgerClient(Settings(kafka_bootstrap="127.0.0.1:9"), bootstrap="127.0.0.1:9")
    yield c
    c.close()


def test_an_intent_carries_the_canonical_arguments_and_their_hash(client):
    intent = client.intent("acme/refund/inv-1", "refund", "payments", {"b": 1, "a": 2.0},
                           workflow=WORKFLOW)
    assert intent.args_json == '{"a":2,"b":1}' and intent.tenant == "acme"


@pytest.mark.parametrize("key,action,says", [
    ("acme/payout/p1", "note", "action differs"),
    ("acme/refund", "refund", "tenant/action/business-id"),
    # Tenant names the ledger keys its own records under (domain/keys.py reserved_tenant).
    ("unmapped/refund/r1", "refund", "'unmapped'"),
    ("~freeze/refund/r1", "refund", "'~'"),
])
def test_an_intent_the_ledger_would_dead_letter_is_refused(client, key, action, says):
    with pytest.raises(InvalidIntentError, match=says):
        client.intent(key, action, "payments", {"amount": 1}, workflow=WORKFLOW)


def test_an_intent_whose_state_row_the_ledger_could_not_write_is_refused_before_sending(
) -> None:
    """The processor dead-letters an intent whose args and payload, as the key's state row
    writes them, pass the changelog's record limit; the client says so at once instead of
    leaving its caller to wait for an answer that never comes."""
    from ledger_stream.sdk.client import _check
    from tests.factories import intent as made

    with pytest.raises(InvalidIntentError, match="state row"):
        _check(made(args={"a": '"' * 300_000}))
    _check(made(args={"a": "x" * 800_000}))

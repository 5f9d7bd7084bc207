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
])
def test_an_intent_the_ledger_would_dead_letter_is_refused(client, key, action, says):
    with pytest.raises(InvalidIntentError, match=says):
        client.intent(key, action, "payments", {"amount": 1}, workflow=WORKFLOW)

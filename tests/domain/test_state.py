"""The state store row: round trip, and rows written before a field was added."""

import pytest

from ledger_stream.domain import Policy, decide
from ledger_stream.domain import events as ev
from ledger_stream.domain.state import KeyState, Phase, absent
from tests.factories import KEY, claim, intent, now_of, outcome

pytestmark = pytest.mark.timeout(30)

POLICY = Policy()


def test_row_round_trip_with_history():
    state = absent(KEY)
    for event in (intent(), claim(), outcome(ev.OutcomeStatus.SUCCEEDED, external_id="x")):
        state = decide(state, event, POLICY, now_of(event)).state
    assert state.history and state.phase is Phase.SUCCEEDED
    assert KeyState.from_row(state.to_row()) == state


def test_a_shorter_row_from_an_older_version_reads_with_defaults():
    state = decide(absent(KEY), intent(), POLICY, 1_000).state
    row = state.to_row()
    shorter = row[:-2]  # as if the last two fields did not exist yet
    restored = KeyState.from_row(shorter)
    assert restored.phase is Phase.RESERVED and restored.history == ()

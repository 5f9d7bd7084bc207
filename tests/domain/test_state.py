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


def test_a_row_from_before_the_history_field_reads_with_an_empty_history():
    row = decide(absent(KEY), intent(), POLICY, 1_000).state.to_row()
    restored = KeyState.from_row(row[:5])
    assert restored.phase is Phase.RESERVED and restored.history == ()
    assert restored.attempt == 0  # a field the old row did not have: its default


@pytest.mark.parametrize("in_flight,incoming,compatible", [
    ("1.0", "1.9", True), ("2.1.0", "2.4", True), ("1.2.3", "1.2.4", True),
    ("1.9", "2.0", False), ("1.2.3", "2.2.3", False), ("10", "1.0", False),
])
def test_workflow_versions_are_compatible_when_their_major_parts_are_equal(
        in_flight, incoming, compatible):
    from ledger_stream.domain.policy import versions_compatible

    assert versions_compatible(in_flight, incoming) is compatible


def test_a_sealed_marker_from_before_outcomes_were_kept_reads_as_rejected():
    from ledger_stream.domain import events as ev
    from ledger_stream.domain.outputs import key_status

    old_marker = KeyState(KEY, phase=Phase.EXPIRED)
    assert key_status(old_marker) is ev.ReceiptStatus.REJECTED
    assert key_status(KeyState(KEY, phase=Phase.SUCCEEDED, sealed_outcome="failed")) is \
        ev.ReceiptStatus.SUCCEEDED

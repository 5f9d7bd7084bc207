"""A stored row's deadline read straight from its values (restore's hot path) is the
deadline of the KeyState the row decodes to, for every phase and for older, shorter rows."""

from __future__ import annotations

import json
from dataclasses import fields

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ledger_stream.domain.deadlines import due_ms
from ledger_stream.domain.policy import ActionRules, Policy
from ledger_stream.domain.state import FIELD_INDEX, KeyState, Phase
from ledger_stream.state.rows import (
    RowDeadline,
    decode_row,
    decode_values,
    encode_row,
    encode_values,
)
from tests.state.samples import policies, states

pytestmark = pytest.mark.timeout(60)



@given(states, policies)
def test_the_row_deadline_is_the_state_deadline(state: KeyState, policy: Policy) -> None:
    row = encode_row(state)
    assert due_ms(RowDeadline(decode_values(row)), policy) == due_ms(decode_row(row), policy)


@given(states, policies, st.integers(min_value=FIELD_INDEX["phase"] + 1,
                                     max_value=len(fields(KeyState))))
def test_an_older_shorter_row_reads_its_missing_fields_at_their_defaults(
        state: KeyState, policy: Policy, length: int) -> None:
    """Fields are only ever appended: a row written before a field existed is shorter."""
    row = json.dumps(state.to_row()[:length]).encode()
    assert due_ms(RowDeadline(decode_values(row)), policy) == due_ms(decode_row(row), policy)


def test_a_finished_rows_deadline_is_its_actions_own_seal() -> None:
    policy = Policy(replay_window_ms=100_000,
                    actions={"refund": ActionRules(replay_window_ms=5_000)})
    done = KeyState(key="acme/refund/r1", phase=Phase.SUCCEEDED, action="refund",
                    terminal_at_ms=1_000)
    row = encode_row(done)
    assert due_ms(RowDeadline(decode_values(row)), policy) == due_ms(done, policy) == 6_001


_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12)


@given(st.lists(_JSON_VALUES, max_size=30))
def test_a_row_is_the_bytes_json_writes(values: list[object]) -> None:
    """Rows written before orjson (``json.dumps``, compact, not ASCII-escaped) and after are
    the same bytes: the changelog and the store never see a row change its encoding."""
    try:
        expected = json.dumps(values, separators=(",", ":"), ensure_ascii=False).encode()
    except UnicodeEncodeError:  # a lone surrogate: json refuses it, and so does the row
        with pytest.raises(UnicodeEncodeError):
            encode_values(values)
        return
    assert encode_values(values) == expected


@given(states)
def test_a_states_row_is_the_bytes_json_writes(state: KeyState) -> None:
    expected = json.dumps(state.to_row(), separators=(",", ":"), ensure_ascii=False).encode()
    assert encode_row(state) == expected

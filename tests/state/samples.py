"""Generated key states and policies, shared by the state row and restore tests (a fixtures
module: it holds no tests)."""

from __future__ import annotations

from hypothesis import strategies as st

from ledger_stream.domain.policy import ActionRules, Policy
from ledger_stream.domain.state import KeyState, Phase

times = st.integers(min_value=0, max_value=2**45)


small = st.integers(min_value=0, max_value=9)


states = st.builds(
    KeyState, key=st.text(min_size=1, max_size=8), phase=st.sampled_from(list(Phase)),
    attempt=small, stall_alerted=small, not_before_ms=times, phase_since_ms=times,
    lease_until_ms=times, terminal_at_ms=times, sent_at_ms=times,
    pregrant_until_ms=st.just(0) | times, action=st.sampled_from(["", "refund", "send_email"]))


# Some actions with a replay window of their own (seals come from the row's action).
action_rules = st.dictionaries(
    st.sampled_from(["refund", "send_email"]),
    st.builds(ActionRules, replay_window_ms=st.none() | times), max_size=2)

policies = st.builds(Policy, replay_window_ms=times, stall_after_ms=times,
                     reconcile_timeout_ms=times, clock_skew_ms=st.integers(0, 10**6),
                     actions=action_rules)

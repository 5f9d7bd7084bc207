"""Running the decision core over a sequence of events: the helpers the decision tests
share (a fixtures module: it holds no tests)."""

from __future__ import annotations

from collections.abc import Iterable

from ledger_stream.domain import Policy, absent, decide
from ledger_stream.domain import events as ev
from ledger_stream.domain.containment import Hold
from ledger_stream.domain.state import KeyState
from tests.factories import KEY, now_of

POLICY = Policy(replay_window_ms=100_000, retry_backoff_ms=500, max_attempts=3,
                clock_skew_ms=1_000)


def run(events: Iterable[ev.InputEvent], state: KeyState | None = None,
        policy: Policy = POLICY, hold: Hold | None = None,
        ) -> tuple[KeyState, list[ev.OutputEvent]]:
    """``events`` decided in turn from ``state`` (default: absent), each under ``hold``
    (a freeze covering the key, if any)."""
    state = state or absent(KEY)
    outputs: list[ev.OutputEvent] = []
    for event in events:
        decision = decide(state, event, policy, now_of(event), hold)
        state = decision.state
        outputs.extend(decision.outputs)
    return state, outputs


def of(outputs: Iterable[ev.OutputEvent], cls: type) -> list:
    return [o for o in outputs if isinstance(o, cls)]

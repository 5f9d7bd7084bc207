"""`freezes` (and the gateway's /v1/freezes) read the freezes in force from partition 0's
log; they must agree with what each partition's processor holds, retried commands (a
repeated event id) included."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ledger_stream.domain import events as ev
from ledger_stream.domain.containment import Containment
from ledger_stream.operate.containment import FreezeRecord, active, repeats

SCOPES = [("acme", "refund"), ("", "refund"), ("acme", "payout")]


def _record(offset: int, event_id: str, scope: int, frozen: bool,
            mode: ev.FreezeMode = ev.FreezeMode.HOLD) -> FreezeRecord:
    tenant, action = SCOPES[scope]
    event = ev.Containment(event_id, 0, action, tenant, frozen, mode, "", "ops", offset)
    return FreezeRecord(event, offset, offset)


def test_a_retried_unfreeze_after_a_new_freeze_leaves_the_new_freeze_listed() -> None:
    log = [_record(0, "f1", 0, True), _record(1, "u1", 0, False), _record(2, "f2", 0, True),
           _record(3, "u1", 0, False)]  # the unfreeze run again with its --event-id
    assert [r.event.event_id for r in active(log)] == ["f2"]
    assert repeats(log) == {3}


commands = st.lists(st.tuples(st.integers(0, 5), st.integers(0, 2), st.booleans(),
                              st.sampled_from(list(ev.FreezeMode))), max_size=40)


@settings(max_examples=300, deadline=None)
@given(commands)
def test_the_log_reader_agrees_with_the_processors_containment(
        steps: list[tuple[int, int, bool, ev.FreezeMode]]) -> None:
    # Six ids among up to 40 commands: most are reused, some for the same command (a
    # retry, ignored), some for another (a new command).
    log = [_record(offset, f"e{n}", scope, frozen, mode)
           for offset, (n, scope, frozen, mode) in enumerate(steps)]
    held = Containment()
    for record in log:
        held, _ = held.apply(record.event, record.offset)
    listed = {(r.event.tenant, r.event.action, r.event.mode) for r in active(log)}
    assert listed == {(f.tenant, f.action, f.mode) for f in held.freezes}

"""`freezes` (and the gateway's /v1/freezes) read the freezes in force from partition 0's
log; they must agree with what each partition's processor holds: retried commands (a
repeated event id), freezes past the scopes a processor keeps and invalid records included.
The processor's side is its real step (read, contain) over an in-memory store."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger_stream.domain import containment as domain
from ledger_stream.domain import events as ev
from ledger_stream.domain.values import replace
from ledger_stream.operate.containment import FreezeRecord, active, ignored
from ledger_stream.processor.partition import CONTAINMENT_KEY
from tests.processor.containment_log import Log, OldCommand, P

SCOPES = [("acme", "refund"), ("", "refund"), ("acme", "payout"), ("beta", "payout"),
          ("", "mail")]


def _event(event_id: str, scope: int, frozen: bool,
           mode: ev.FreezeMode = ev.FreezeMode.HOLD, reason: str = "") -> ev.Containment:
    tenant, action = SCOPES[scope]
    return ev.Containment(event_id, P, action, tenant, frozen, mode, reason, "ops", 0)


def _records(events: list[ev.Containment], old: frozenset[int] = frozenset()
             ) -> list[FreezeRecord]:
    """As ``log`` reads them; the offsets in ``old`` were written before commands applied
    once (their keys have no send id)."""
    return [FreezeRecord(e, offset, offset, counts=offset not in old)
            for offset, e in enumerate(events)]


def test_a_retried_unfreeze_after_a_new_freeze_leaves_the_new_freeze_listed() -> None:
    log = _records([_event("f1", 0, True), _event("u1", 0, False), _event("f2", 0, True),
                    _event("u1", 0, False)])  # the unfreeze run again with its --event-id
    assert [r.event.event_id for r in active(log)] == ["f2"]
    assert ignored(log) == {3: "repeat"}


def test_a_freeze_a_processor_refuses_is_not_listed_nor_remembered(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(domain, "FREEZE_LIMIT", 2)
    log = _records([_event("a", 0, True), _event("b", 2, True),
                    _event("x", 4, True),  # a third scope: poison to every processor
                    _event("u", 2, False), _event("x", 4, True)])  # the retry now fits
    assert ignored(log) == {2: "refused: a Containment past 2 frozen scopes"}
    assert [r.event.event_id for r in active(log)] == ["a", "x"]


commands = st.lists(st.tuples(st.integers(0, 5), st.integers(0, len(SCOPES) - 1),
                              st.booleans(), st.sampled_from(list(ev.FreezeMode)),
                              st.integers(0, 12), st.booleans()), max_size=40)


@settings(max_examples=200, deadline=None)
@given(commands)
def test_the_log_reader_agrees_with_the_processors_step(
        steps: list[tuple[int, int, bool, ev.FreezeMode, int, bool]]) -> None:
    # Six ids among up to 40 commands: most are reused, some for the same command (a
    # retry, ignored), some for another (a new command). At most three scopes are kept, so
    # freezes are refused too; a twelfth of the records is invalid (a reason too long);
    # about half were written before commands applied once (never repeats).
    original = domain.FREEZE_LIMIT
    domain.FREEZE_LIMIT = 3
    try:
        events = [_event(f"e{n}", scope, frozen, mode,
                         "x" * (domain.TEXT_LIMIT + 1) if junk == 0 else "")
                  for n, scope, frozen, mode, junk, _ in steps]
        old = frozenset(i for i, step in enumerate(steps) if step[5])
        processor = Log()
        for i, event in enumerate(events):
            processor.run(OldCommand(event) if i in old else event)
        row = processor.store.get(CONTAINMENT_KEY)
        held = domain.Containment.from_row(json.loads(row)) if row else domain.Containment()
        listed = {(r.event.tenant, r.event.action, r.event.mode)
                  for r in active(_records(events, old))}
        assert listed == {(f.tenant, f.action, f.mode) for f in held.freezes}
    finally:
        domain.FREEZE_LIMIT = original


def test_the_command_producer_takes_a_deployments_longer_message_timeout() -> None:
    from ledger_stream.kafka.client_config import use_client_settings
    from ledger_stream.kafka.clients import Producer
    from ledger_stream.operate.containment import transactional_config

    use_client_settings({"delivery.timeout.ms": "60000"})
    try:
        Producer(transactional_config("127.0.0.1:1"))  # librdkafka checks it here
    finally:
        use_client_settings({})


def test_a_copy_the_processors_refuse_before_deciding_is_never_listed() -> None:
    from ledger_stream.domain.containment import refused_on_read

    ok = _event("f", 0, True)
    assert refused_on_read(replace(ok, partition=0), b"~containment/f/" + b"0" * 32, 0) == ""
    assert refused_on_read(replace(ok, partition=0), b"~containment/\xff", 0) == \
        "message key is not UTF-8"
    assert "partition 1" in refused_on_read(replace(ok, partition=1), b"~containment/f", 0)
    assert refused_on_read(replace(ok, partition=0), b"elsewhere/f", 0) == \
        "Containment keyed outside ~containment/"
    records = [FreezeRecord(replace(ok, partition=0), 0, 0, poison="message key is not UTF-8")]
    assert active(records) == [] and ignored(records) == {0: "refused: message key is not UTF-8"}

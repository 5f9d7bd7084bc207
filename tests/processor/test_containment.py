"""Containment through the processor's step a (records → decisions → overlay → store →
changelog → restore), without a broker: a freeze holds new work at its point of the log,
the hold survives a restore, and the unfreeze releases the held keys in the order held."""

from __future__ import annotations

import itertools

import pytest

from ledger_stream.domain import events as ev
from ledger_stream.domain.containment import (
    APPLIED_LIMIT,
    FREEZE_LIMIT,
    HELD_LIMIT_BYTES,
    Containment,
)
from ledger_stream.kafka.partitioner import partition_for
from ledger_stream.processor.changelog import Positions
from ledger_stream.processor.partition import CONTAINMENT_KEY
from ledger_stream.processor.restore import apply_records
from ledger_stream.state import MemoryPartitionStore
from tests.factories import claim, intent, outcome
from tests.processor.containment_log import GROUP, POLICY, Log, OldCommand, P
from tests.processor.fakes import ATTEMPTS, CODEC, PARTITIONS, make_step

pytestmark = pytest.mark.timeout(30)



def keys_in(partition: int, n: int, tenant: str = "acme", action: str = "refund",
            pad: int = 0, id_prefix: str = "k") -> list[str]:
    found, i = [], 0
    while len(found) < n:
        key = f"{tenant}/{action}/{id_prefix}{i}{'x' * pad}"
        if partition_for(key.encode(), PARTITIONS) == partition:
            found.append(key)
        i += 1
    return found


KEYS = keys_in(P, 5)




_COMMANDS = itertools.count()




def freeze(action: str = "refund", tenant: str = "acme", frozen: bool = True,
           mode: ev.FreezeMode = ev.FreezeMode.HOLD, partition: int = P,
           event_id: str = "") -> ev.Containment:
    """A freeze (or unfreeze) command, with a new event id unless ``event_id`` (a retry)."""
    event_id = event_id or f"f-{action}-{tenant}-{frozen}-{next(_COMMANDS)}"
    return ev.Containment(event_id, partition, action, tenant, frozen, mode, "incident 7",
                          "ops", 0)


def dispatches(outputs: list[object]) -> list[str]:
    return [o.key for o in outputs if isinstance(o, ev.Dispatch)]


def answers(outputs: list[object], intent_id: str) -> ev.Receipt:
    (receipt,) = [o for o in outputs if isinstance(o, ev.Receipt)
                  and o.intent_event_id == intent_id]
    return receipt


def test_a_freeze_holds_new_intents_and_the_unfreeze_releases_them_in_order() -> None:
    log = Log()
    before = intent(key=KEYS[0])
    assert dispatches(log.run(before)) == [KEYS[0]]  # before the freeze: dispatched

    log.run(freeze())
    held = [intent(key=k) for k in (KEYS[3], KEYS[1], KEYS[4])]
    outputs = log.run(*held)
    assert dispatches(outputs) == []
    for i in held:
        receipt = answers(outputs, i.event_id)
        assert (receipt.status, receipt.reason) == (ev.ReceiptStatus.HELD, ev.Reason.FROZEN)
        assert "incident 7" in receipt.detail
    again = intent(key=KEYS[3])  # a resumed worker's duplicate: still held, no dispatch
    outputs = log.run(again)
    assert dispatches(outputs) == []
    assert answers(outputs, again.event_id).status is ev.ReceiptStatus.HELD

    other_tenant = intent(key=keys_in(P, 1, tenant="beta")[0])
    other_action = intent(key=keys_in(P, 1, action="email")[0])
    assert dispatches(log.run(other_tenant, other_action)) == [other_tenant.key,
                                                                  other_action.key]

    released = log.run(freeze(frozen=False))
    assert dispatches(released) == [KEYS[3], KEYS[1], KEYS[4]]  # the order they were held
    for d in (o for o in released if isinstance(o, ev.Dispatch)):
        assert d.attempt == 1
    assert dispatches(log.run(freeze(frozen=False))) == []  # a second unfreeze: nothing


def test_retries_of_a_frozen_action_wait() -> None:
    log = Log()
    first = intent(key=KEYS[0])
    log.run(first, claim(key=KEYS[0]))
    log.run(freeze())
    outputs = log.run(outcome(ev.OutcomeStatus.NOT_APPLIED, key=KEYS[0]))
    assert dispatches(outputs) == []
    (receipt,) = [o for o in outputs if isinstance(o, ev.Receipt)]
    assert (receipt.status, receipt.reason, receipt.attempts) == (
        ev.ReceiptStatus.HELD, ev.Reason.FROZEN, 2)
    outputs = log.run(claim(key=KEYS[0], attempt=2, claim_id="c2"))
    assert [type(o) for o in outputs] == [ev.Held]  # (no dispatch of attempt 2 left yet)

    (dispatch,) = [o for o in log.run(freeze(frozen=False)) if isinstance(o, ev.Dispatch)]
    assert (dispatch.key, dispatch.attempt) == (KEYS[0], 2)


def test_the_freeze_and_the_held_keys_survive_a_restore_from_the_changelog() -> None:
    log = Log()
    log.run(freeze())
    log.run(intent(key=KEYS[2]), intent(key=KEYS[0]))

    restored = MemoryPartitionStore(P)
    apply_records(restored, log.changelog, Positions(10**6, 10**6), GROUP, POLICY)
    assert restored.get(CONTAINMENT_KEY) == log.store.get(CONTAINMENT_KEY)
    log.store = restored  # a new processor on the restored state

    late = intent(key=KEYS[1])
    assert dispatches(log.run(late)) == []  # still frozen after the restore
    assert dispatches(log.run(freeze(frozen=False))) == [KEYS[2], KEYS[0], KEYS[1]]


def test_a_dispatch_sent_before_the_freeze_is_held_at_its_claim_then_granted() -> None:
    log = Log()
    sent = intent(key=KEYS[0])
    assert dispatches(log.run(sent)) == [KEYS[0]]
    log.run(freeze())
    outputs = log.run(claim(key=KEYS[0], claim_id="c1"))
    (held,) = [o for o in outputs if isinstance(o, ev.Held)]
    assert held.claim_id == "c1" and not any(isinstance(o, ev.Grant) for o in outputs)
    outputs = log.run(claim(key=KEYS[0], claim_id="c2"))  # claiming again while frozen
    assert [type(o) for o in outputs] == [ev.Held]

    assert dispatches(log.run(freeze(frozen=False))) == [KEYS[0]]  # the same dispatch id
    (grant,) = [o for o in log.run(claim(key=KEYS[0], claim_id="c3"))
                if isinstance(o, ev.Grant)]
    assert grant.claim_id == "c3"


def test_a_key_under_two_freezes_is_held_again_by_the_one_still_in_force() -> None:
    log = Log()
    log.run(freeze(tenant="acme"), freeze(tenant=""))  # this tenant, and every tenant
    log.run(intent(key=KEYS[0]))
    assert dispatches(log.run(freeze(tenant="acme", frozen=False))) == []
    assert dispatches(log.run(freeze(tenant="", frozen=False))) == [KEYS[0]]


def test_approval_mode_rejects_new_intents_without_approval_and_holds_nothing() -> None:
    log = Log()
    log.run(freeze(mode=ev.FreezeMode.APPROVAL))
    unapproved = intent(key=KEYS[0])
    outputs = log.run(unapproved)
    assert dispatches(outputs) == []
    receipt = answers(outputs, unapproved.event_id)
    assert (receipt.status, receipt.reason) == (ev.ReceiptStatus.REJECTED, ev.Reason.APPROVAL)
    assert any(isinstance(o, ev.Alert) and o.kind is ev.AlertKind.APPROVAL_MISMATCH
               for o in outputs)
    assert dispatches(log.run(freeze(frozen=False))) == []


def test_a_full_hold_queue_rejects_new_intents_and_loses_none_of_the_held() -> None:
    log = Log()
    log.run(freeze())
    long_keys = keys_in(P, 1500, pad=200)  # about 1,100 fit in the queue
    held: list[str] = []
    rejected: list[str] = []
    for start in range(0, len(long_keys), 500):
        chunk = [intent(key=k) for k in long_keys[start:start + 500]]
        outputs = log.run(*chunk)
        for i in chunk:
            receipt = answers(outputs, i.event_id)
            (held if receipt.status is ev.ReceiptStatus.HELD else rejected).append(i.key)
            if receipt.status is ev.ReceiptStatus.REJECTED:
                assert receipt.reason is ev.Reason.FROZEN
        if rejected:
            break
    assert rejected, "the queue never filled"
    assert len(log.store.get(CONTAINMENT_KEY) or b"") < HELD_LIMIT_BYTES * 1.2
    assert dispatches(log.run(freeze(frozen=False))) == held


def test_a_containment_record_in_another_partition_is_poison() -> None:
    step = make_step(POLICY)
    record = CODEC.encode(freeze(partition=P))
    event = step.read(record, b"~containment/x", ATTEMPTS, (P + 1) % PARTITIONS, 4, 9)
    assert isinstance(event, ev.PoisonInput)
    assert f"Containment for partition {P} read from" in event.reason
    for bad in (freeze(action="re/fund"), freeze(tenant="*"), freeze(action="")):
        event = step.read(CODEC.encode(bad), b"~containment/x", ATTEMPTS, P, 5, 9)
        assert isinstance(event, ev.PoisonInput), bad


# --- from a hostile review -------------------------------------------------------------------


def test_a_key_whose_tenant_starts_with_a_tilde_keeps_its_deadlines_after_a_restore() -> None:
    log = Log()
    key = keys_in(P, 1, tenant="~ops")[0]
    log.run(intent(key=key))
    restored = MemoryPartitionStore(P)
    apply_records(restored, log.changelog, Positions(10**6, 10**6), GROUP, POLICY)
    log.store = restored
    log.clock += POLICY.stall_after_ms + 1_000
    outputs = log.run(ev.Tick(P, "test", 0))
    assert any(isinstance(o, ev.Alert) and o.kind is ev.AlertKind.STALLED for o in outputs)


def fill(log: Log, keys: list[str]) -> int:
    """Hold intents for ``keys`` until the queue refuses one; how many were held."""
    held = 0
    for start in range(0, len(keys), 1000):
        chunk = [intent(key=k) for k in keys[start:start + 1000]]
        outputs = log.run(*chunk)
        statuses = [answers(outputs, i.event_id).status for i in chunk]
        held += statuses.count(ev.ReceiptStatus.HELD)
        if ev.ReceiptStatus.REJECTED in statuses:
            return held
    raise AssertionError("the hold queue never filled")


def test_the_stored_row_stays_bounded_with_non_ascii_keys_and_long_texts_are_poison() -> None:
    log = Log()
    log.run(freeze())
    assert fill(log, keys_in(P, 3000, action="refund", pad=0, id_prefix="💸" * 40)) > 100
    row = log.store.get(CONTAINMENT_KEY) or b""
    assert len(row) <= HELD_LIMIT_BYTES + 4096, len(row)

    long = ev.Containment("f-long", P, "refund", "acme", True, ev.FreezeMode.HOLD, "x" * 900,
                          "ops", 0)
    outputs = log.run(long)
    assert [type(o) for o in outputs] == [ev.DeadLetter, ev.Alert]
    assert "reason longer than" in outputs[1].detail


def test_past_the_freeze_limit_a_new_scope_is_poison_and_changes_nothing() -> None:
    log = Log()
    log.run(*[freeze(action=f"a{i}") for i in range(FREEZE_LIMIT)])
    outputs = log.run(freeze(action="one-more"))
    assert [type(o) for o in outputs] == [ev.DeadLetter, ev.Alert]
    assert dispatches(log.run(intent(key=keys_in(P, 1, action="one-more")[0]))) != []
    assert [type(o) for o in log.run(freeze(action="a0", mode=ev.FreezeMode.APPROVAL))] == []


def test_with_the_hold_queue_full_a_pre_freeze_dispatch_still_gets_no_grant() -> None:
    log = Log(step_ms=1)  # the dispatch's stall deadline does not come while filling
    log.run(intent(key=KEYS[0]))
    log.run(freeze())
    fill(log, [k for k in keys_in(P, 8000) if k != KEYS[0]])
    outputs = log.run(claim(key=KEYS[0], claim_id="c1"))
    assert [type(o) for o in outputs] == [ev.Held]  # not held (no room), but no grant
    assert b'"' + KEYS[0].encode() + b'"' not in (log.store.get(CONTAINMENT_KEY) or b"")
    log.run(freeze(frozen=False))
    granted = log.run(claim(key=KEYS[0], claim_id="c2"))
    assert [type(o) for o in granted] == [ev.Grant, ev.Receipt]


def test_a_held_key_settled_by_a_late_report_leaves_the_queue() -> None:
    log = Log()
    log.run(intent(key=KEYS[0]), claim(key=KEYS[0]))
    log.run(freeze())
    log.run(outcome(ev.OutcomeStatus.NOT_APPLIED, key=KEYS[0]))  # attempt 2 held
    log.run(outcome(ev.OutcomeStatus.SUCCEEDED, key=KEYS[0], external_id="pay-1"))  # late
    row = log.store.get(CONTAINMENT_KEY) or b""
    assert KEYS[0].encode() not in row
    assert dispatches(log.run(freeze(frozen=False))) == []


def test_an_approval_freeze_is_not_bypassed_by_a_narrower_hold_freeze() -> None:
    log = Log()
    log.run(freeze(tenant="", mode=ev.FreezeMode.APPROVAL), freeze(tenant="acme"))
    unapproved = intent(key=KEYS[0])
    outputs = log.run(unapproved)
    receipt = answers(outputs, unapproved.event_id)
    assert (receipt.status, receipt.reason) == (ev.ReceiptStatus.REJECTED, ev.Reason.APPROVAL)
    assert dispatches(log.run(freeze(tenant="acme", frozen=False))) == []


def test_a_key_held_again_by_a_second_freeze_keeps_its_place() -> None:
    log = Log()
    log.run(freeze(tenant="acme"), freeze(tenant=""))
    first, second = KEYS[0], keys_in(P, 1, tenant="beta")[0]
    log.run(intent(key=first), intent(key=second))
    assert dispatches(log.run(freeze(tenant="acme", frozen=False))) == []
    assert dispatches(log.run(freeze(tenant="", frozen=False))) == [first, second]


def test_an_unknown_outcome_without_a_grant_on_a_held_key_asks_the_target_first() -> None:
    # Found by a hostile review (2026-12-05): at least once, a Grant from an abandoned batch
    # can be on the topic; its holder called and could not tell what happened. On a held
    # key the unknown outcome was kept as stale, and the unfreeze dispatched the attempt
    # again: a second effect at a target that does not deduplicate.
    log = Log()
    log.run(freeze())
    log.run(intent(key=KEYS[0]))  # held at attempt 1
    asked = log.run(outcome(ev.OutcomeStatus.UNKNOWN, key=KEYS[0], claim_id="c-abandoned"))
    assert [o.key for o in asked if isinstance(o, ev.Reconcile)] == [KEYS[0]]
    assert dispatches(log.run(freeze(frozen=False))) == []  # nothing resent on the unfreeze


def test_a_retried_unfreeze_does_not_lift_a_freeze_set_after_it() -> None:
    # The operator's unfreeze timed out and was run again with its --event-id; meanwhile a
    # colleague froze the action again. Before 2026-12-05 the retry lifted the new freeze.
    log = Log()
    log.run(freeze())
    unfreeze = freeze(frozen=False)
    log.run(unfreeze)
    log.run(freeze())
    log.run(intent(key=KEYS[0]))
    assert log.run(unfreeze) == []  # the retry: nothing released, no alert, no DLQ
    late = intent(key=KEYS[1])
    outputs = log.run(late)
    assert dispatches(outputs) == []
    assert answers(outputs, late.event_id).reason is ev.Reason.FROZEN
    assert dispatches(log.run(freeze(frozen=False))) == [KEYS[0], KEYS[1]]


def test_a_retried_freeze_does_not_freeze_again_after_its_unfreeze() -> None:
    log = Log()
    first = freeze()
    log.run(first, intent(key=KEYS[0]))
    assert dispatches(log.run(freeze(frozen=False))) == [KEYS[0]]
    assert log.run(first) == []
    assert dispatches(log.run(intent(key=KEYS[1]))) == [KEYS[1]]


def test_the_applied_ids_survive_a_restore_and_a_repeat_is_never_poison() -> None:
    log = Log()
    log.run(*[freeze(action=f"a{i}") for i in range(FREEZE_LIMIT - 2)])
    freeze_b, unfreeze_c = freeze(action="b"), freeze(action="c", frozen=False)
    log.run(freeze_b, freeze(action="b", frozen=False))
    log.run(freeze(action="c"), unfreeze_c, freeze(action="c"), freeze(action="d"))  # 64

    restored = MemoryPartitionStore(P)
    apply_records(restored, log.changelog, Positions(10**6, 10**6), GROUP, POLICY)
    log.store = restored  # a new processor, its ids from the changelog
    assert log.run(freeze_b) == []  # a repeat, not a 65th scope (poison)
    assert log.run(unfreeze_c) == []
    assert dispatches(log.run(intent(key=keys_in(P, 1, action="c")[0]))) == []  # still held
    assert dispatches(log.run(intent(key=keys_in(P, 1, action="b")[0]))) != []


def test_a_partition_remembers_the_last_applied_ids_only() -> None:
    c = Containment()
    first = freeze(action="a", event_id="first")
    c, _ = c.apply(first, 1)
    assert c.repeats(first) and c.apply(first, 2)[0] is c
    for i in range(APPLIED_LIMIT):
        c, _ = c.apply(freeze(action="b", frozen=i % 2 == 0, event_id=f"other-{i}"), 3)
    assert len(c.applied) == APPLIED_LIMIT and not c.repeats(first)
    anonymous = ev.Containment("", P, "a", "", True, ev.FreezeMode.HOLD, "", "ops", 0)
    twice, _ = c.apply(anonymous, 4)
    assert not twice.repeats(anonymous) and twice.applied == c.applied  # never a repeat
    assert Containment.from_row(c.to_row()) == c
    old_row = {k: v for k, v in c.to_row().items() if k != "applied"}  # before 2026-12-05
    assert Containment.from_row(old_row).applied == ()


def test_an_id_reused_for_another_command_is_a_new_command() -> None:
    # Through the gateway each tenant names its own commands: another tenant's command (or
    # an unfreeze) with the same id must not be taken for a retry and ignored.
    c, _ = Containment().apply(freeze(tenant="acme", event_id="cmd-1"), 1)
    c, _ = c.apply(freeze(tenant="beta", event_id="cmd-1"), 2)
    assert {f.tenant for f in c.freezes} == {"acme", "beta"}
    c, _ = c.apply(freeze(tenant="acme", frozen=False, event_id="cmd-1"), 3)
    assert {f.tenant for f in c.freezes} == {"beta"}
    assert c.repeats(freeze(tenant="beta", event_id="cmd-1"))
    assert not c.repeats(freeze(tenant="beta", event_id="cmd-1", mode=ev.FreezeMode.APPROVAL))


def test_records_written_before_commands_applied_once_are_never_repeats() -> None:
    # Their processors applied every one, retries included: so does a processor now, and
    # a later record of the same command (keyed with a send id) is not a repeat of them.
    log = Log()
    first, unfreeze = freeze(), freeze(frozen=False)
    log.run(OldCommand(first), OldCommand(unfreeze), OldCommand(freeze()))
    log.run(OldCommand(unfreeze))  # an old retry: it lifted the freeze then, and now
    assert dispatches(log.run(intent(key=KEYS[0]))) == [KEYS[0]]
    log.run(first)  # the same command, sent by this version: applied (not remembered)
    assert dispatches(log.run(intent(key=KEYS[1]))) == []
    log.run(unfreeze)
    log.run(freeze())
    log.run(unfreeze)  # now remembered: this one is a repeat
    assert dispatches(log.run(intent(key=KEYS[2]))) == []


def test_a_containment_keyed_outside_the_command_prefix_is_poison() -> None:
    # `freezes` reads only keys under ~containment/: a freeze keyed otherwise would hold
    # keys no listing shows.
    step = make_step(POLICY)
    event = step.read(CODEC.encode(freeze()), b"acme/refund/k1", ATTEMPTS, P, 5, 9)
    assert isinstance(event, ev.PoisonInput) and "keyed outside" in event.reason

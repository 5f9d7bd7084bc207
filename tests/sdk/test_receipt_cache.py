"""The receipt cache's rules, on receipts built by the decision core itself: it answers a
duplicate of a key this client created and saw succeed exactly as ``decide`` does, and
refuses everything else (the broker tests show the refused cases reach the processor)."""

from __future__ import annotations

import time
from dataclasses import replace

import pytest

from ledger_stream.config import Settings
from ledger_stream.domain import events as ev
from ledger_stream.domain.decide import DEFAULT_POLICY, decide
from ledger_stream.domain.keys import args_hash
from ledger_stream.domain.policy import ActionRules, Policy
from ledger_stream.domain.state import KeyState
from ledger_stream.sdk.receipt_cache import ReceiptCache
from tests.sdk.settled import ARGS, KEY
from tests.sdk.settled import intent as _intent
from tests.sdk.settled import settle as _settle


def test_a_duplicate_is_answered_as_the_decision_core_answers_it() -> None:
    cache = ReceiptCache()
    first = _intent(1)
    state, settled = _settle(first, int(time.time() * 1000))
    cache.learn(first, settled)
    repeat = _intent(2, origin=ev.Origin.REPLAY)
    got = cache.answer(repeat)
    assert got is not None and cache.hits == 0  # a hit once its intent is produced
    (want,) = [o for o in decide(state, repeat, DEFAULT_POLICY, got.at_ms).outputs
               if isinstance(o, ev.Receipt)]
    assert got == want
    assert got.answer is ev.Answer.ALREADY_DONE


@pytest.mark.parametrize("status", [s for s in ev.ReceiptStatus
                                    if s is not ev.ReceiptStatus.SUCCEEDED])
def test_no_state_but_succeeded_is_learned(status: ev.ReceiptStatus) -> None:
    cache = ReceiptCache()
    first = _intent(1)
    _, settled = _settle(first, int(time.time() * 1000))
    cache.learn(first, replace(settled, status=status, key_status=status))
    assert cache.answer(_intent(2)) is None


def test_an_effect_this_client_did_not_create_is_not_learned() -> None:
    cache = ReceiptCache()
    first = _intent(1)
    _, settled = _settle(first, int(time.time() * 1000))
    other = _intent(7)  # answered already_done: another intent's effect
    cache.learn(other, replace(settled, intent_event_id=other.event_id))
    assert cache.answer(_intent(2)) is None


def test_other_arguments_an_approval_and_a_later_pending_answer_are_refused() -> None:
    cache = ReceiptCache()
    first = _intent(1)
    _, settled = _settle(first, int(time.time() * 1000))
    cache.learn(first, settled)
    assert cache.answer(_intent(2, {"amount": 1})) is None
    approval = ev.Approval("ann", first.args_hash, "", 2**62, "sig")
    assert cache.answer(_intent(3, approval=approval)) is None
    cache.learn(first, replace(settled, status=ev.ReceiptStatus.RECONCILING,
                               key_status=ev.ReceiptStatus.RECONCILING))
    assert cache.answer(_intent(4)) is None  # what was known is forgotten


def test_a_key_settled_with_an_approval_is_not_learned() -> None:
    cache = ReceiptCache()
    first = _intent(1)
    _, settled = _settle(first, int(time.time() * 1000))
    approval = ev.Approval("ann", args_hash(ARGS), "", 2**62, "sig")
    cache.learn(replace(first, approval=approval), settled)  # the approved one settled it
    assert cache.answer(_intent(2)) is None


@pytest.mark.parametrize("reason", [ev.Reason.FROZEN, ev.Reason.APPROVAL])
def test_a_frozen_or_approval_refused_action_is_not_answered_any_more(
        reason: ev.Reason) -> None:
    cache = ReceiptCache()
    first = _intent(1)
    _, settled = _settle(first, int(time.time() * 1000))
    cache.learn(first, settled)
    other = _intent(5, key="acme/refund/r-2")
    status = ev.ReceiptStatus.HELD if reason is ev.Reason.FROZEN else ev.ReceiptStatus.REJECTED
    cache.learn(other, replace(settled, key=other.key, intent_event_id=other.event_id,
                               status=status, reason=reason))
    assert cache.answer(_intent(2)) is None
    assert cache.answer(_intent(3, key="beta/refund/r-1")) is None  # never learned


def test_the_window_counts_from_the_settling_receipt() -> None:
    cache = ReceiptCache(ttl_s=60)
    first = _intent(1)
    _, settled = _settle(first, int(time.time() * 1000) - 61_000)
    cache.learn(first, settled)
    assert cache.answer(_intent(2)) is None


def test_each_tenant_has_its_own_bounded_map() -> None:
    cache = ReceiptCache(size=2)
    now = int(time.time() * 1000)
    for n, key in enumerate(["acme/refund/a", "acme/refund/b", "acme/refund/c",
                             "beta/refund/a"]):
        intent = _intent(n, key=key)
        cache.learn(intent, _settle(intent, now)[1])
    assert cache.answer(_intent(10, key="acme/refund/a")) is None  # evicted, oldest first
    assert cache.answer(_intent(13, key="acme/refund/b")) is not None  # used: kept...
    intent = _intent(14, key="acme/refund/d")
    cache.learn(intent, _settle(intent, now)[1])
    assert cache.answer(_intent(15, key="acme/refund/c")) is None  # ...over c, unused
    assert cache.answer(_intent(11, key="acme/refund/d")) is not None
    assert cache.answer(_intent(12, key="beta/refund/a")) is not None  # not acme's bound


def test_the_cache_is_bounded_across_tenants_too() -> None:
    """A gateway's client serves every tenant: past ``total`` settled keys in all, the
    least recently used tenant's oldest key goes first, whatever each tenant's own bound."""
    cache = ReceiptCache(size=10, total=3)
    now = int(time.time() * 1000)
    keys = ["acme/refund/a", "acme/refund/b", "beta/refund/a", "gamma/refund/a"]
    for n, key in enumerate(keys):
        intent = _intent(n, key=key)
        cache.learn(intent, _settle(intent, now)[1])
    answered = [key for n, key in enumerate(keys)
                if cache.answer(_intent(20 + n, key=key)) is not None]
    assert answered == keys[1:]  # acme's oldest went first


def test_a_tenant_whose_keys_were_all_dropped_does_not_break_the_bound() -> None:
    """A tenant's only key dropped (its intent not recorded) leaves no empty map behind for
    the bound across tenants to trip on: learning goes on, and the bound holds."""
    cache = ReceiptCache(size=10, total=2)
    now = int(time.time() * 1000)
    gone = _intent(1, key="acme/refund/a")
    cache.learn(gone, _settle(gone, now)[1])
    cache.forget(gone.key, "not recorded")
    keys = ["beta/refund/a", "beta/refund/b", "beta/refund/c"]
    for n, key in enumerate(keys):
        intent = _intent(10 + n, key=key)
        cache.learn(intent, _settle(intent, now)[1])
    answered = [key for n, key in enumerate(keys)
                if cache.answer(_intent(20 + n, key=key)) is not None]
    assert answered == keys[1:]


def test_past_the_bound_of_refused_actions_nothing_is_answered(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Forgetting that an action was frozen would answer for it: at the bound the cache
    answers nothing rather than forget one."""
    from ledger_stream.sdk import receipt_cache
    monkeypatch.setattr(receipt_cache, "REFUSED_KEPT", 2)
    cache = ReceiptCache()
    now = int(time.time() * 1000)
    first = _intent(1)
    _, settled = _settle(first, now)
    cache.learn(first, settled)
    assert cache.answer(_intent(2)) is not None
    for n, tenant in enumerate(["beta", "gamma", "delta"]):
        other = _intent(5 + n, key=f"{tenant}/refund/r-2")
        cache.learn(other, replace(settled, key=other.key, intent_event_id=other.event_id,
                                   status=ev.ReceiptStatus.HELD, reason=ev.Reason.FROZEN))
    assert cache.answer(_intent(3)) is None  # acme's refunds were never frozen


def test_a_failed_record_drops_the_key_and_is_listed() -> None:
    cache = ReceiptCache()
    first = _intent(1)
    cache.learn(first, _settle(first, int(time.time() * 1000))[1])
    cache.forget(KEY, "acme/refund/r-1 e-2: broker down")
    assert cache.answer(_intent(3)) is None
    assert cache.unrecorded == ["acme/refund/r-1 e-2: broker down"]


def test_the_knob() -> None:
    assert Settings().sdk.receipt_cache is True
    off = Settings(sdk_receipt_cache=False, sdk_receipt_cache_ttl_s=5, sdk_receipt_cache_size=3)
    assert (off.sdk.receipt_cache, off.sdk.receipt_cache_ttl_s,
            off.sdk.receipt_cache_size) == (False, 5.0, 3)


def test_a_closed_client_answers_nothing_from_its_cache() -> None:
    from ledger_stream import LedgerClient

    client = LedgerClient(Settings(kafka_bootstrap="127.0.0.1:1"))
    first = _intent(1)
    assert client.receipt_cache is not None
    client.receipt_cache.learn(first, _settle(first, int(time.time() * 1000))[1])
    client.close()
    with pytest.raises(RuntimeError, match="closed"):
        client.submit(_intent(2))


def _receipts(state: KeyState, intent: ev.Intent, policy: Policy, now: int) -> ev.Receipt:
    (receipt,) = [o for o in decide(state, intent, policy, now).outputs
                  if isinstance(o, ev.Receipt)]
    return receipt


def test_a_repeat_of_the_settling_intent_does_not_restart_the_window() -> None:
    """The same intent submitted again (the retry a pending answer invites) is answered by
    the processor at its own time: that receipt's time is not when the key settled, so a
    cache that took it would answer past the key's seal."""
    now = int(time.time() * 1000)
    policy = replace(DEFAULT_POLICY, actions={"refund": ActionRules(replay_window_ms=60_000)})
    cache = ReceiptCache(ttl_s=30)  # below the action's window, as the docs ask
    first = _intent(1)
    state, _ = _settle(first, now - 50_000)  # settled 50 s ago
    cache.learn(first, _receipts(state, first, policy, now))  # the repeat's answer
    later = _intent(2)
    assert _receipts(state, later, policy, now + 15_000).reason is ev.Reason.EXPIRED_KEY
    assert cache.answer(later) is None


def test_an_action_window_below_the_ttl_bounds_it() -> None:
    """The client's own settings name an action's replay window shorter than the TTL: the
    cache answers that action's keys only within the window."""
    settings = Settings(actions={"refund": {"replay_window_ms": 5_000}})
    cache = ReceiptCache.from_settings(settings)
    assert cache is not None and cache.ttl_s == 60
    first = _intent(1)
    cache.learn(first, _settle(first, int(time.time() * 1000) - 6_000)[1])
    assert cache.answer(_intent(2)) is None


def test_an_action_the_settings_say_needs_an_approval_is_never_answered() -> None:
    """A duplicate without an approval of such an action is refused by the ledger
    (``approval missing``): the cache leaves it to the ledger."""
    cache = ReceiptCache.from_settings(Settings(approval_required_actions=["refund"]))
    assert cache is not None
    first = _intent(1)
    state, settled = _settle(first, int(time.time() * 1000))
    cache.learn(first, settled)
    policy = replace(DEFAULT_POLICY, approval_required_actions=frozenset({"refund"}))
    assert _receipts(state, _intent(2), policy, settled.at_ms).reason is ev.Reason.APPROVAL
    assert cache.answer(_intent(2)) is None


EXITS_UNCLOSED = """
import sys, time
from ledger_stream import LedgerClient
from ledger_stream.config import Settings
from ledger_stream.domain import events as ev
client = LedgerClient(Settings(kafka_bootstrap="127.0.0.1:1", kafka_timeout_s=1))
workflow = ev.Workflow("billing-bot", "1", "t-1", "refund")
first = client.intent("acme/refund/r-1", "refund", "payments", {"amount": 1}, workflow=workflow)
now = int(time.time() * 1000)
client.receipt_cache.learn(first, ev.Receipt(
    "r", first.key, first.event_id, ev.ReceiptStatus.SUCCEEDED, ev.Reason.NONE,
    first.args_hash, 1, now, key_status=ev.ReceiptStatus.SUCCEEDED,
    effect_intent_id=first.event_id))
again = client.intent("acme/refund/r-1", "refund", "payments", {"amount": 1}, workflow=workflow)
assert client.submit(again).answer is ev.Answer.ALREADY_DONE
print(again.event_id)
"""  # ends without close(), Kafka unreachable


def test_a_cached_answer_never_recorded_is_said_when_the_process_ends_unclosed() -> None:
    """Its caller got the answer; the intent never reached Kafka: the process says so as
    it ends, rather than dropping the intent in the producer's queue unseen."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", EXITS_UNCLOSED], capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip()  # answered from the cache
    assert "intent answered from the receipt cache not recorded" in done.stderr, done.stderr


def test_a_full_producer_queue_never_blocks_the_async_client_s_event_loop() -> None:
    """Kafka gone and the producer's local queue full: a duplicate the cache could answer
    is left to the ledger's path (which waits off the loop and says Kafka is unavailable)
    rather than waiting for room on the event loop, which would stall every coroutine of
    the process (the gateway's requests among them)."""
    import asyncio
    import threading

    from ledger_stream import AsyncLedgerClient
    from ledger_stream.kafka.producer import EventProducer
    from ledger_stream.sdk.errors import LedgerUnavailable

    settings = Settings(kafka_bootstrap="127.0.0.1:1", kafka_timeout_s=1)
    client = AsyncLedgerClient(settings)
    sync = client.client
    sync._producer = EventProducer(settings, "127.0.0.1:1", sync.codec, acks="all",
                                   **{"linger.ms": 0, "queue.buffering.max.messages": 1})
    first = _intent(1)
    assert sync.receipt_cache is not None
    sync.receipt_cache.learn(first, _settle(first, int(time.time() * 1000))[1])
    ticks: list[float] = []
    outcome: list[object] = []

    async def ticker() -> None:
        while True:
            ticks.append(time.monotonic())
            await asyncio.sleep(0.05)

    async def scenario() -> None:
        beat = asyncio.create_task(ticker())
        assert (await client.submit(_intent(2))).answer is ev.Answer.ALREADY_DONE  # queued
        try:
            await client.submit(_intent(3), wait=2)
        except (LedgerUnavailable, TimeoutError) as exc:
            outcome.append(exc)
        beat.cancel()

    runner = threading.Thread(target=asyncio.run, args=(scenario(),), daemon=True)
    runner.start()
    runner.join(30)
    assert not runner.is_alive(), "the event loop is blocked in the producer's queue"
    assert outcome and max(b - a for a, b in zip(ticks, ticks[1:], strict=False)) < 1.0

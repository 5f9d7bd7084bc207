"""What must hold at the end of every simulated run, checked against ground truth: the
target's own ledger of effects, the intents the agents submitted, and what the ledger
published (receipts, alerts, the dispatch log). Never against values the code under test
computed for itself, except where the invariant is about that output (receipts agree with
the key's state; every claim answered).
"""

from __future__ import annotations

from collections import defaultdict

from ledger_lab.simulation.world import World
from ledger_stream.domain import events as ev
from ledger_stream.domain.outputs import key_status
from ledger_stream.domain.state import Phase

FINAL = (Phase.SUCCEEDED, Phase.FAILED, Phase.EXPIRED)


def violations(world: World) -> list[str]:
    """Every broken invariant, as one line each (empty when the run is correct)."""
    found: list[str] = []
    for key in world.keys:
        found += _effects(world, key)
        found += _progress(world, key)
        found += _alerts(world, key)
    found += _answers(world)
    found += _sends(world)
    return found


def _sends(world: World) -> list[str]:
    """A granted call leaves within its lease, unless its sender froze after the check."""
    return [f"{key}: claim {claim} sent at {at}, its lease ended at {lease}"
            for key, claim, at, frozen, lease in world.sends
            if lease is not None and at >= lease and not frozen and not world.cfg.fast_path]


def _effects(world: World, key: str) -> list[str]:
    state = world.processor.state(key)
    effects = world.target.of(key)
    out = []
    if effects and state.phase is Phase.ABSENT:
        out.append(f"{key}: {len(effects)} effect(s) but no intent was accepted")
    for e in effects:
        if state.args_hash and e.args_hash != state.args_hash:
            out.append(f"{key}: effect {e.external_id} with conflicting arguments")
    if len(effects) > 1 and not any(e.late for e in effects):
        out.append(f"{key}: {len(effects)} effects, none committed after its lease "
                   "(the one documented window)")
    reported = {o.external_id for o in _outcomes(world, key)
                if o.status is ev.OutcomeStatus.SUCCEEDED}
    if len(effects) > 1 and any(e.late and e.external_id in reported
                                for e in effects) and \
            ev.AlertKind.DUPLICATE_EFFECT not in _kinds(world, key):
        out.append(f"{key}: a second effect was reported but no duplicate_effect alert")
    return out


def _progress(world: World, key: str) -> list[str]:
    state = world.processor.state(key)
    if state.phase is Phase.ABSENT:
        return []  # every intent for it was rejected (the run has no approvals: a bug)
    out = []
    if state.phase not in FINAL:
        out.append(f"{key}: not terminal after healing: {state.phase.value} "
                   f"attempt {state.attempt} ({state.status_detail})")
    effects = world.target.of(key)
    if state.phase is Phase.SUCCEEDED and state.external_id not in \
            {e.external_id for e in effects}:
        out.append(f"{key}: succeeded with {state.external_id!r}, which the target lacks")
    if state.phase is Phase.FAILED and [e for e in effects if not e.late]:
        out.append(f"{key}: failed, but the target holds its effect")
    receipts = [r for r in world.processor.receipts if r.key == key]
    if receipts and receipts[-1].key_status is not key_status(state):
        out.append(f"{key}: latest receipt says {receipts[-1].key_status.value}, "
                   f"the key is {state.phase.value}")
    return out


def _alerts(world: World, key: str) -> list[str]:
    kinds = _kinds(world, key)
    effects = world.target.of(key)
    out = []
    if ev.AlertKind.DUPLICATE_EFFECT in kinds and len(effects) < 2 and \
            not any(e.late for e in effects):
        out.append(f"{key}: duplicate_effect alert with {len(effects)} effect(s)")
    if ev.AlertKind.EFFECT_WITHOUT_INTENT in kinds:
        out.append(f"{key}: effect_without_intent alert for a key with an intent")
    if ev.AlertKind.LATE_EFFECT in kinds and not effects:
        out.append(f"{key}: late_effect alert, the target holds no effect")
    if ev.AlertKind.CONFLICTING_ARGUMENTS in kinds and not world.cfg.conflicting:
        out.append(f"{key}: conflicting_arguments alert, no conflicting intent was sent")
    return out


def _answers(world: World) -> list[str]:
    """Every claim the processor decided got an answer naming it; one Grant per attempt."""
    answered: set[str] = set()
    grants: dict[tuple[str, int], set[str]] = defaultdict(set)
    for logged in world.processor.dispatch:
        out = logged.event
        if isinstance(out, ev.Grant | ev.Held | ev.Reconcile | ev.Done):
            answered.add(out.claim_id)
        if isinstance(out, ev.Grant):
            grants[(out.key, out.attempt)].add(out.claim_id)
    found = [f"claim {c} never answered" for c in world.processor.claims_seen - answered]
    found += [f"{k} attempt {n}: {len(c)} claims granted" for (k, n), c in grants.items()
              if len(c) > 1]
    return found


def _kinds(world: World, key: str) -> set[ev.AlertKind]:
    return {a.kind for a in world.processor.alerts if a.key == key}


def _outcomes(world: World, key: str) -> list[ev.AttemptOutcome]:
    return [logged.event for logged in world.processor.log
            if isinstance(logged.event, ev.AttemptOutcome) and logged.event.key == key]

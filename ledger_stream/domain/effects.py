"""Reports that the target holds a key's effect (a success, a lookup that found it). They
are never dropped: they settle a key in flight, turn a failed key into a succeeded one with
``late_effect``, agree with the effect that settled the key, or raise ``duplicate_effect``."""

from __future__ import annotations

from ledger_stream.domain.events import AlertKind, OutputEvent
from ledger_stream.domain.outputs import alert_for, state_receipt
from ledger_stream.domain.state import AttemptRecord, KeyState, Phase
from ledger_stream.domain.transitions import Decision, enter

# A watcher (``ledger-stream watch``) reports an effect it found at its target as a lookup
# whose claim id is this prefix and the target's name (the connector's ``--name``).
WATCH_CLAIM = "watch:"
# The longest id of an effect at its target the ledger records as given: an operator's
# decision with a longer one is refused; a watcher reports a longer one by its hash.
EXTERNAL_ID_LIMIT = 256


def watched_target(claim_id: str) -> str | None:
    """The target a watcher's report was found at (None: not a watcher's report)."""
    return claim_id[len(WATCH_CLAIM):] if claim_id.startswith(WATCH_CLAIM) else None


def effect_seen(state: KeyState, record: AttemptRecord, source: str, deduplicates: bool,
                 *, by_lookup: bool) -> Decision:
    """A report that the target holds the key's effect: settles the key, or is the same
    effect again, or is a duplicate. Never dropped."""
    now, ext = record.at_ms, record.external_id
    if state.phase is Phase.EXPIRED and state.sealed_outcome == Phase.FAILED.value:
        # The key failed and was sealed: this is its first effect. The sealed key now says
        # so (a second, different effect is then a duplicate), and stays sealed.
        late = state.changed(sealed_outcome=Phase.SUCCEEDED.value, external_id=ext,
                             settled_by=record.claim_id,
                             status_detail="effect reported after the key failed and was sealed")
        alert = alert_for(state.key, AlertKind.LATE_EFFECT, source,
                          f"attempt {record.attempt} applied {ext!r} after the key failed "
                          "and was sealed", now)
        return Decision(late, (state_receipt(late, now), alert))
    if state.phase in (Phase.SUCCEEDED, Phase.EXPIRED):
        if _same_effect(state, record, deduplicates, by_lookup):
            return Decision(state.with_record(record) if state.phase.live else state)
        return _duplicate(state, record, source,
                          f"another effect {ext!r} (claim {record.claim_id}), "
                          f"first {state.external_id!r} (claim {state.settled_by})")
    done = enter(state.changed(external_id=ext, settled_by=record.claim_id, status_detail=""),
                 Phase.SUCCEEDED, now, record)
    if state.phase is Phase.FAILED:
        late = done.changed(status_detail="effect reported after the key failed")
        alert = alert_for(state.key, AlertKind.LATE_EFFECT, source,
                       f"attempt {record.attempt} applied {ext!r} after the key failed", now)
        return Decision(late, (state_receipt(late, now), alert))
    outputs: tuple[OutputEvent, ...] = (state_receipt(done, now),)
    # The current attempt was granted to another claim, and its outcome is not known to be
    # "nothing applied" (it is running, unknown, or with an operator).
    # (Claim ids are unique, so the claim alone names the grant's holder: a key asked again
    # at attempt n+1 without a dispatch keeps attempt n's grant.)
    granted_elsewhere = bool(state.granted_claim_id) and state.phase in (
        Phase.DISPATCHED, Phase.RECONCILING, Phase.NEEDS_OPERATOR
    ) and record.claim_id != state.granted_claim_id
    if granted_elsewhere and not deduplicates:
        outputs += (_second_effect_possible(state, record, source, by_lookup),)
    return Decision(done, outputs)


def _second_effect_possible(state: KeyState, record: AttemptRecord, source: str,
                            by_lookup: bool) -> OutputEvent:
    """The alert for an effect seen while another claim holds (or held, with an outcome
    nobody knows) the current attempt's grant at a target that does not deduplicate."""
    now, ext, holder = record.at_ms, record.external_id, state.granted_claim_id
    if not by_lookup:
        # A real call landed: a second effect exists or is on its way. (Found by the
        # model: a frozen holder's late success while the next attempt was being
        # reconciled settled the key with no alert.)
        return alert_for(state.key, AlertKind.DUPLICATE_EFFECT, source,
                         f"attempt {record.attempt} applied {ext!r} while attempt "
                         f"{state.attempt} was granted to claim {holder}", now)
    # A lookup by key for an earlier claim cannot say whose effect it found: the holder's
    # own (one effect) or the earlier attempt's (and the holder may apply a second). The
    # key settles, nothing is resent, and an operator is asked to look; it is not called
    # a duplicate, which it may not be.
    return alert_for(state.key, AlertKind.RECONCILIATION_REQUIRED, source,
                     f"a lookup for attempt {record.attempt} found {ext!r} while attempt "
                     f"{state.attempt} was granted to claim {holder} at a target that does "
                     "not deduplicate: check whether that attempt applied too", now)


def _same_effect(state: KeyState, record: AttemptRecord, deduplicates: bool,
                 by_lookup: bool) -> bool:
    """Whether a report about a settled key names the effect that settled it.

    External ids alone do not identify an effect where they derive from the key (an SMTP
    Message-ID): equal ids count as one effect only for the settling claim, for the holder
    of the settled attempt (the key was settled by a lookup that found its effect), for a
    lookup, or at a target that deduplicates by key.
    """
    ext = record.external_id
    if not ext or ext != state.external_id:
        return False
    holder = bool(state.granted_claim_id) and record.claim_id == state.granted_claim_id
    return by_lookup or deduplicates or holder or record.claim_id == state.settled_by


def _duplicate(state: KeyState, record: AttemptRecord, source: str, detail: str) -> Decision:
    alert = alert_for(state.key, AlertKind.DUPLICATE_EFFECT, source, detail, record.at_ms)
    if not state.phase.live:
        return Decision(state, (alert,))
    counted = state.changed(duplicate_effects=state.duplicate_effects + 1).with_record(record)
    return Decision(counted, (alert,))

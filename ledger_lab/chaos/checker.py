"""The soak's verdict, from ground truth: the targets' own ledgers (the sandbox's request log
and effects, PostgreSQL's effect rows), the ledger's topics, and what the agents journaled.

Nothing the processor or the connectors computed about themselves is trusted: an effect is
counted where the target recorded it, a submission where the agent wrote it down before and
after ``submit``, the order of a key's intents where Kafka holds them.

Violations (each fails the soak):

- ``lost_acknowledged``: an intent the SDK acknowledged (a receipt or a timeout after the
  acknowledgement) that is not on the intents topic: a failed produce taken as acknowledged.
- ``unsettled``: a key whose latest receipt is not terminal (succeeded, failed, rejected) and
  not waiting for an operator (needs_reconciliation): lost work.
- ``unanswered``: an intent on the topic with no receipt naming it.
- ``duplicate_effect``: more than one effectful call (payments) or row (PostgreSQL) for a key,
  without the ledger's ``duplicate_effect`` alert (with it, it is the documented window and
  is counted, not failed).
- ``effect_without_intent``, ``success_without_effect``, ``effect_of_failed_key`` (an effect
  under a key the ledger answered failed or rejected, without a ``late_effect`` alert),
  ``wrong_arguments`` (the effect's body is not the reserving intent's arguments),
  ``unapproved_effect`` (an effect for a key no intent with a valid approval reserved).
- ``effect_at_wrong_target``: an effect at a target the key's intents did not name.
- ``call_without_grant``: an effectful call at the payments target whose attempt id (the
  claim id) no Grant names: the grant-only connector called without the ledger's leave.
- ``wrong_answer``: a receipt naming an intent says what the ground truth contradicts: a
  conflicting intent not rejected for conflict, an unapproved one not rejected for its
  approval, a success whose external id is not the payment the target holds.
- ``missing_alert``: a conflicting or unapproved intent without its alert, a key waiting for
  an operator without its ``reconciliation_required`` alert.
- ``unexplained_alert``: an alert no input or fault explains (poison input, an effect without
  intent, an expired key, a version mismatch, a conflict or approval alert without such an
  intent, a ``reconciliation_required`` or ``stalled`` alert with no fault that can cause it
  on the key's target between the key's first intent and the alert: see ``CAUSES``; the
  soak's operator phases add ``processor-stop`` and ``connector-stop`` at each graceful
  stop and at the start that follows it, and the soak a ``cold-start`` when its load
  begins; these explain ``stalled`` only). A
  ``duplicate_effect`` alert with one effect at the target is counted, not failed: the
  ledger raises it for a stale success, when a second effect "exists or is on its way".
- ``process_crashed`` (added by the soak): a processor, connector or agent that exited by
  itself with an error, or a sandbox that exited other than on an armed crash fault.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ledger_lab.falsify.evidence import LedgerTopics
from ledger_lab.sandbox.faults import DEFAULT_DELAY_S
from ledger_stream.domain import events as ev
from ledger_stream.domain.approval import ApprovalKeys, approval_problem

SETTLED = frozenset({"succeeded", "failed", "rejected", "needs_reconciliation"})
# Requests the sandbox logged that reached its commit point: what a target without its
# deduplication would have executed. The faults that stop before the commit are not.
NOT_EFFECTFUL = frozenset({"fault:error_before_commit", "fault:decline",
                           "fault:crash_before_commit"})
# The two sandbox faults that make it exit when they act: every call in flight then ends
# unknown, as if the sandbox had been killed at that moment (the request log's ``at``).
SANDBOX_CRASHES = frozenset({"fault:crash_before_commit", "fault:crash_after_commit"})
APPROVAL_ACTIONS = frozenset({"refund"})
PAYMENTS, LEDGER_DB = "payments", "ledger-db"  # the soak's two targets (world.py)
TARGET_MEMBERS = {PAYMENTS: "payments-sandbox", LEDGER_DB: "postgres"}  # world.py's names
WAITING_WITHOUT_ALERT = "waiting for an operator, no reconciliation_required alert"
# How long before a key's first claim a fault may still act on it: a member killed is down
# for up to 4 s, then takes seconds to rejoin; a paused one stays frozen 8 s.
LEAD_MS = 15_000
# The ledger's first work (FaultAt.kind, the soak marks it when its load begins). A fresh
# cluster runs its first transactions slowly: in the one-minute soak each processor's first
# stage window (its first ~8 s of input) averaged 480-811 ms of flush and 170-234 ms of
# commit per batch, against 25-45 ms and 20-25 ms once warm; a grant is then readable
# 0.7-2 s after its claim. The soak's connectors may take 1,000 ms for that (lease 4,000 ms
# less the 1,500 ms call, the 1,000 ms record margin and the 500 ms skew: harness FAST), so
# a key first claimed then can lapse three times in a row (``lapse_alert_after``): a
# ``stalled`` alert with no fault. Within LEAD_MS of the mark, as for a fault.
COLD_START = "cold-start"


@dataclass(frozen=True)
class FaultAt:
    """An injected fault as the checker needs it: when (wall clock), what, whom, and when
    its victim was back (started again after a kill or a graceful stop; 0: not down, or not
    known). It acts from ``at_ms`` to ``until_ms``: while a broker is away the others lead
    its partitions, and at its return the leadership moves back to it."""

    at_ms: int
    kind: str
    victim: str
    until_ms: int = 0


@dataclass(frozen=True)
class KeyStory:
    """What the checker knows of one key when an operational alert names it."""

    target: str
    holders: frozenset[str]  # members whose claims (``<member>.<n>``) the key had by then
    target_faulted: bool  # a sandbox fault acted on one of the key's own requests
    reconciling_since_ms: int | None = None  # the key's first Reconcile by then, if any


def _unknown_outcome_cause(fault: FaultAt, key: KeyStory) -> bool:
    """Can ``fault`` have left the key's attempt outcome unknown (the road to the operator
    queue)? Its target killed; a connector that held one of its claims killed or frozen
    mid-call; once the processor asked for a reconciliation, any connector of its target
    killed or frozen from LEAD_MS before that (reconcile jobs are not claimed: the connector
    reading the job's partition runs it, and one lost or late runs into the reconcile
    timeout); a broker lost while the outcome was reported; a sandbox fault only when the
    sandbox's own log shows it acting on this key's request by the time of the alert."""
    reconciling = key.reconciling_since_ms is not None \
        and fault.at_ms >= key.reconciling_since_ms - LEAD_MS
    return (fault.kind == "broker-kill"
            or (fault.kind in ("target-kill", "target-crash")
                and fault.victim == TARGET_MEMBERS.get(key.target))
            or (fault.kind == "target-fault" and key.target_faulted)
            or (fault.kind in ("connector-kill", "pause")
                and (fault.victim in key.holders
                     or (reconciling and fault.victim.startswith(f"{key.target}-connector")))))


def _lapse_cause(fault: FaultAt, key: KeyStory) -> bool:
    """Can ``fault`` make grants come too late to call (``stalled``)? Anything that slows
    the processor (killed, frozen, a broker lost, stopped or started by an operator phase,
    the ledger's cold start: ``COLD_START``), the key's connectors or its target. A
    graceful stop or a cold start explains no lost outcome: it is not a cause of
    ``reconciliation_required``."""
    return (fault.kind in ("processor-kill", "broker-kill", "target-kill", "target-crash",
                           "target-fault", "pause", "processor-stop", COLD_START)
            or (fault.kind in ("connector-kill", "connector-stop")
                and fault.victim.startswith(f"{key.target}-connector")))


# The operational alerts and the faults that can explain each one.
CAUSES = {ev.AlertKind.RECONCILIATION_REQUIRED: _unknown_outcome_cause,
          ev.AlertKind.STALLED: _lapse_cause}


@dataclass(frozen=True)
class Journaled:
    sent: dict[str, dict[str, Any]]  # event id -> the "sent" line
    acked: set[str]  # event ids acknowledged (answer or timeout after the acknowledgement)
    errors: int  # submits the SDK reported as not acknowledged


def read_journals(paths: list[Path]) -> Journaled:
    sent: dict[str, dict[str, Any]] = {}
    acked: set[str] = set()
    errors = 0
    for path in paths:
        if not path.exists():
            continue
        for line in path.read_text().splitlines():
            try:
                row = json.loads(line)
            except ValueError:
                continue  # the last line of a killed agent may be cut
            if row.get("t") == "sent":
                sent[row["event"]] = row
            elif row.get("t") in ("answer", "timeout"):
                acked.add(row["event"])
            elif row.get("t") == "error":
                errors += 1
    return Journaled(sent, acked, errors)


@dataclass(frozen=True)
class TargetTruth:
    """Effects per operation key as each target recorded them."""

    payment_calls: dict[str, list[dict[str, Any]]]  # effectful requests per key
    payment_effects: dict[str, dict[str, Any]]  # the sandbox's effect row per key
    credit_rows: dict[str, list[int]]  # amounts per key in PostgreSQL's effect table
    faults_acted: dict[str, int] = field(default_factory=dict)  # sandbox fault mode -> times
    faulted_keys: dict[str, int] = field(default_factory=dict)  # key -> when a sandbox fault
    # first acted on one of its requests (ms, the sandbox's log)
    sandbox_crashes_ms: tuple[int, ...] = ()  # when a crash fault made the sandbox exit


def target_truth(sandbox_ledger: dict[str, Any], credit_rows: list[tuple[str, int]]
                 ) -> TargetTruth:
    calls: dict[str, list[dict[str, Any]]] = defaultdict(list)
    acted: Counter[str] = Counter()
    faulted: dict[str, int] = {}
    crashes: list[int] = []
    for request in sandbox_ledger["requests"]:
        if request["result"] not in NOT_EFFECTFUL:
            calls[request["idempotency_key"]].append(request)
        if request["result"].startswith("fault:"):
            mode = request["result"][len("fault:"):]
            acted[mode] += 1
            # The sandbox logs a request when it answers: after a delaying fault's wait,
            # which began when the request came (the soak arms every mode with its default
            # delay). The fault acted from then: the call's deadline ran out during the wait.
            at_ms = int((request["at"] - DEFAULT_DELAY_S.get(mode, 0.0)) * 1000)
            faulted[request["idempotency_key"]] = min(
                at_ms, faulted.get(request["idempotency_key"], at_ms))
        if request["result"] in SANDBOX_CRASHES:
            crashes.append(int(request["at"] * 1000))
    effects = {e["idempotency_key"]: e for e in sandbox_ledger["effects"]}
    credits: dict[str, list[int]] = defaultdict(list)
    for key, amount in credit_rows:
        credits[key].append(amount)
    return TargetTruth(dict(calls), effects, dict(credits), dict(sorted(acted.items())),
                       faulted, tuple(crashes))


@dataclass
class Verdict:
    figures: dict[str, Any] = field(default_factory=dict)
    violations: list[dict[str, str]] = field(default_factory=list)
    windows: list[dict[str, str]] = field(default_factory=list)  # alerted, documented

    def violate(self, kind: str, key: str, why: str) -> None:
        self.violations.append({"kind": kind, "key": key, "why": why})

    @property
    def ok(self) -> bool:
        return not self.violations


def check(topics: LedgerTopics, truth: TargetTruth, journal: Journaled, keys: ApprovalKeys,
          faults: Sequence[FaultAt]) -> Verdict:
    verdict = Verdict()
    intents: dict[str, list[ev.Intent]] = defaultdict(list)
    for intent in topics.intents:
        intents[intent.key].append(intent)
    on_topic = {i.event_id for i in topics.intents}
    latest: dict[str, ev.Receipt] = {}
    answered: set[str] = set()
    for receipt in topics.receipts:
        latest[receipt.key] = receipt
        answered.add(receipt.intent_event_id)
    alerts: dict[str, Counter[str]] = defaultdict(Counter)
    for alert in topics.alerts:
        alerts[alert.key][alert.kind.value] += 1
    answers: dict[str, list[ev.Receipt]] = defaultdict(list)
    for receipt in topics.receipts:
        answers[receipt.intent_event_id].append(receipt)
    granted = {g.claim_id for g in topics.grants}

    for event_id in sorted(journal.acked - on_topic):
        verdict.violate("lost_acknowledged", journal.sent.get(event_id, {}).get("key", "?"),
                        f"intent {event_id} was acknowledged but is not on the intents topic")
    for key, its in sorted(intents.items()):
        last = latest.get(key)
        status = last.key_status.value if last else "no receipt"
        if status not in SETTLED:
            verdict.violate("unsettled", key, f"latest state {status}")
        for intent in its:
            if intent.event_id not in answered:
                verdict.violate("unanswered", key, f"intent {intent.event_id} has no receipt")
        _check_effects(verdict, key, its, status, truth, alerts[key], keys)
        _check_alerts(verdict, key, its, alerts[key], keys)
        _check_answers(verdict, key, its, answers, truth, keys)
        for call in truth.payment_calls.get(key, []):
            if call["attempt_id"] not in granted:
                verdict.violate("call_without_grant", key, f"attempt {call['attempt_id']} "
                                "called the payments target with no Grant naming it")

    effect_keys = set(truth.payment_calls) | set(truth.credit_rows)
    for key in sorted(effect_keys - set(intents)):
        verdict.violate("effect_without_intent", key, "the target holds an effect for a key "
                        "with no intent")
    # A sandbox crash fault acts when a request comes, not when armed: when it acted (the
    # sandbox's own log) it counts as the sandbox killed at that moment.
    crashes = [FaultAt(at, "target-crash", TARGET_MEMBERS[PAYMENTS])
               for at in truth.sandbox_crashes_ms]
    explained = _check_fault_alerts(verdict, intents, topics, truth, [*faults, *crashes])
    for key, last in sorted(latest.items()):
        if last.key_status.value == "needs_reconciliation" \
                and not alerts[key][ev.AlertKind.RECONCILIATION_REQUIRED.value]:
            verdict.violate("missing_alert", key, WAITING_WITHOUT_ALERT)

    statuses = Counter(r.key_status.value for r in latest.values())
    effects_per_key = Counter(len(truth.payment_calls.get(k, [])) +
                              len(truth.credit_rows.get(k, [])) for k in intents)
    verdict.figures = {
        "intents_sent": len(journal.sent),
        "intents_acknowledged": len(journal.acked),
        "submit_errors": journal.errors,
        "intents_on_topic": len(on_topic),
        "keys": len(intents),
        "keys_by_state": dict(sorted(statuses.items())),
        "keys_by_effect_count": {str(n): c for n, c in sorted(effects_per_key.items())},
        "effects": sum(len(v) for v in truth.payment_calls.values()) +
        sum(len(v) for v in truth.credit_rows.values()),
        "alerts_by_kind": dict(sorted(Counter(a.kind.value for a in topics.alerts).items())),
        "duplicate_effects_alerted": len(verdict.windows),
        "operational_alerts_by_cause": explained,
        "target_faults_acted": truth.faults_acted,
    }
    return verdict


def _check_fault_alerts(verdict: Verdict, intents: dict[str, list[ev.Intent]],
                        topics: LedgerTopics, truth: TargetTruth, faults: Sequence[FaultAt]
                        ) -> dict[str, dict[str, int]]:
    """Each operational alert must follow a fault that can cause it (``CAUSES``), acting
    between LEAD_MS before the key's first claim (its first intent, if it had no claim) and
    the alert: fired by the alert, its victim not back (``until_ms``) before that window (a
    sandbox fault: any time before, since it waits armed for a request); the latest such
    fault is counted as its cause."""
    claims: dict[str, list[ev.AttemptClaim]] = defaultdict(list)
    for claim in topics.claims:
        claims[claim.key].append(claim)
    reconciles: dict[str, list[ev.Reconcile]] = defaultdict(list)
    for reconcile in topics.reconciles:
        reconciles[reconcile.key].append(reconcile)
    explained: dict[str, Counter[str]] = defaultdict(Counter)
    for alert in topics.alerts:
        can_cause = CAUSES.get(alert.kind)
        if can_cause is None:
            continue
        its = intents.get(alert.key)
        if not its:
            verdict.violate("unexplained_alert", alert.key, f"{alert.kind.value} for a key "
                            "with no intent")
            continue
        held = [c for c in claims.get(alert.key, []) if c.at_ms <= alert.at_ms]
        asked = [r.at_ms for r in reconciles.get(alert.key, []) if r.at_ms <= alert.at_ms]
        story = KeyStory(its[0].target, frozenset(c.connector.rsplit(".", 1)[0] for c in held),
                         truth.faulted_keys.get(alert.key, alert.at_ms + 1) <= alert.at_ms,
                         min(asked, default=None))
        since = min((c.at_ms for c in held), default=min(i.at_ms for i in its)) - LEAD_MS
        # An armed sandbox fault waits for the next request: it may predate the claim.
        causes = [f for f in faults if f.at_ms <= alert.at_ms and can_cause(f, story)
                  and (since <= max(f.at_ms, f.until_ms) or f.kind == "target-fault")]
        if not causes:
            verdict.violate("unexplained_alert", alert.key, f"{alert.kind.value} at "
                            f"{alert.at_ms}: no fault that can cause it on {story.target} "
                            f"(claims held by {sorted(story.holders) or 'nobody'}) since {since}")
            continue
        explained[alert.kind.value][max(causes, key=lambda f: f.at_ms).kind] += 1
    return {kind: dict(sorted(c.items())) for kind, c in sorted(explained.items())}


def _reserving(its: list[ev.Intent], keys: ApprovalKeys) -> ev.Intent | None:
    """The intent that reserved the key: the first one, in the partition's order, whose
    approval holds (an intent refused for its approval leaves the key absent)."""
    for intent in its:
        if approval_problem(intent, keys, intent.action in APPROVAL_ACTIONS,
                            intent.at_ms) is None:
            return intent
    return None


def _check_effects(verdict: Verdict, key: str, its: list[ev.Intent], status: str,
                   truth: TargetTruth, alerts: Counter[str], keys: ApprovalKeys) -> None:
    calls = truth.payment_calls.get(key, [])
    rows = truth.credit_rows.get(key, [])
    count = len(calls) + len(rows)
    targets = {i.target for i in its}
    if (calls and PAYMENTS not in targets) or (rows and LEDGER_DB not in targets):
        verdict.violate("effect_at_wrong_target", key, f"effects at payments {len(calls)}, "
                        f"ledger-db {len(rows)}; the intents name {sorted(targets)}")
    if len(rows) > 1:  # the PostgreSQL connector's receipt row fences: never a window
        verdict.violate("duplicate_effect", key, f"{len(rows)} rows in PostgreSQL")
    elif count > 1:
        what = f"{len(calls)} effectful calls at the payments target, {len(rows)} rows"
        if alerts[ev.AlertKind.DUPLICATE_EFFECT.value]:
            verdict.windows.append({"key": key, "why": what + ", alerted"})
        else:
            verdict.violate("duplicate_effect", key, what + ", no duplicate_effect alert")
    if status == "succeeded" and count == 0:
        verdict.violate("success_without_effect", key, "answered succeeded, no effect")
    if count and status in ("failed", "rejected") and not alerts[ev.AlertKind.LATE_EFFECT]:
        verdict.violate("effect_of_failed_key", key, f"answered {status}, effect applied")
    if not count:
        return
    reserving = _reserving(its, keys)
    if reserving is None:
        verdict.violate("unapproved_effect", key, "an effect, no intent with a valid approval")
        return
    effect = truth.payment_effects.get(key)
    if effect is not None and effect["body_hash"] != reserving.args_hash:
        verdict.violate("wrong_arguments", key, "the payment's body is not the reserving "
                        "intent's arguments")
    amount = json.loads(reserving.args_json).get("amount")
    if any(row != amount for row in rows):
        verdict.violate("wrong_arguments", key, "the row's amount is not the reserving "
                        "intent's")


def _classify(its: list[ev.Intent], keys: ApprovalKeys
              ) -> tuple[ev.Intent | None, list[ev.Intent], list[ev.Intent]]:
    """(the reserving intent, the unapproved ones, the ones with other arguments). An intent
    can be both of the last two; on a live key the ledger then answers either way."""
    reserving = _reserving(its, keys)
    unapproved = [i for i in its if approval_problem(
        i, keys, i.action in APPROVAL_ACTIONS, i.at_ms) is not None]
    other_args = [i for i in its if reserving is not None
                  and i.args_hash != reserving.args_hash]
    return reserving, unapproved, other_args


def _check_alerts(verdict: Verdict, key: str, its: list[ev.Intent], alerts: Counter[str],
                  keys: ApprovalKeys) -> None:
    _, unapproved, other_args = _classify(its, keys)
    approval, conflict = (ev.AlertKind.APPROVAL_MISMATCH.value,
                          ev.AlertKind.CONFLICTING_ARGUMENTS.value)
    only_unapproved = [i for i in unapproved if i not in other_args]
    only_conflicting = [i for i in other_args if i not in unapproved]
    both = [i for i in unapproved if i in other_args]
    if only_unapproved and not alerts[approval]:
        verdict.violate("missing_alert", key, f"no {approval} alert")
    if only_conflicting and not alerts[conflict]:
        verdict.violate("missing_alert", key, f"no {conflict} alert")
    if both and not (alerts[approval] or alerts[conflict]):
        verdict.violate("missing_alert", key, f"no {approval} or {conflict} alert")
    if alerts[approval] and not unapproved:
        verdict.violate("unexplained_alert", key, f"{approval} without such an intent")
    if alerts[conflict] and not other_args:
        verdict.violate("unexplained_alert", key, f"{conflict} without such an intent")
    for kind in (ev.AlertKind.EFFECT_WITHOUT_INTENT, ev.AlertKind.POISON_INPUT,
                 ev.AlertKind.EXPIRED_KEY_REUSE, ev.AlertKind.VERSION_MISMATCH):
        if alerts[kind.value]:
            verdict.violate("unexplained_alert", key, f"{kind.value}: no such input was sent")


def _check_answers(verdict: Verdict, key: str, its: list[ev.Intent],
                   answers: dict[str, list[ev.Receipt]], truth: TargetTruth,
                   keys: ApprovalKeys) -> None:
    """What each intent was told, against the ground truth."""
    _, unapproved, other_args = _classify(its, keys)
    paid = truth.payment_effects.get(key)
    for intent in its:
        for receipt in answers.get(intent.event_id, []):
            told = (receipt.status, receipt.reason)
            if intent in unapproved and intent in other_args:
                if receipt.status is not ev.ReceiptStatus.REJECTED:
                    verdict.violate("wrong_answer", key, f"unapproved intent with other "
                                    f"arguments told {told}")
            elif intent in unapproved and told != (ev.ReceiptStatus.REJECTED,
                                                   ev.Reason.APPROVAL):
                verdict.violate("wrong_answer", key, f"unapproved intent told {told}")
            elif intent in other_args and told != (ev.ReceiptStatus.REJECTED,
                                                   ev.Reason.CONFLICT):
                verdict.violate("wrong_answer", key, f"conflicting intent told {told}")
            elif (receipt.status is ev.ReceiptStatus.SUCCEEDED and intent.target == PAYMENTS
                  and (paid is None or receipt.external_id != paid["id"])):
                verdict.violate("wrong_answer", key, f"told succeeded with "
                                f"{receipt.external_id!r}, the target holds "
                                f"{paid['id'] if paid else 'no payment'}")

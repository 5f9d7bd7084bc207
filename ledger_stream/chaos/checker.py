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
- ``missing_alert``: a conflicting or unapproved intent without its alert.
- ``unexplained_alert``: an alert no input or fault explains (poison input, an effect without
  intent, an expired key, a version mismatch, a conflict or approval alert without such an
  intent, a duplicate-effect alert without a second effect).
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ledger_stream.domain import events as ev
from ledger_stream.domain.approval import approval_problem
from ledger_stream.falsify.evidence import LedgerTopics

SETTLED = frozenset({"succeeded", "failed", "rejected", "needs_reconciliation"})
# Requests the sandbox logged that reached its commit point: what a target without its
# deduplication would have executed. The two faults that stop before the commit are not.
NOT_EFFECTFUL = frozenset({"fault:error_before_commit", "fault:crash_before_commit"})
APPROVAL_ACTIONS = frozenset({"refund"})
# Alerts operational faults explain (a lost outcome, a key stuck while its owner was down).
FAULT_ALERTS = frozenset({ev.AlertKind.RECONCILIATION_REQUIRED, ev.AlertKind.STALLED})


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


def target_truth(sandbox_ledger: dict[str, Any], credit_rows: list[tuple[str, int]]
                 ) -> TargetTruth:
    calls: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for request in sandbox_ledger["requests"]:
        if request["result"] not in NOT_EFFECTFUL:
            calls[request["idempotency_key"]].append(request)
    effects = {e["idempotency_key"]: e for e in sandbox_ledger["effects"]}
    credits: dict[str, list[int]] = defaultdict(list)
    for key, amount in credit_rows:
        credits[key].append(amount)
    return TargetTruth(dict(calls), effects, dict(credits))


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


def check(topics: LedgerTopics, truth: TargetTruth, journal: Journaled, secret: bytes,
          faults_injected: int) -> Verdict:
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
        _check_effects(verdict, key, its, status, truth, alerts[key], secret)
        _check_alerts(verdict, key, its, truth, alerts[key], secret)

    effect_keys = set(truth.payment_calls) | set(truth.credit_rows)
    for key in sorted(effect_keys - set(intents)):
        verdict.violate("effect_without_intent", key, "the target holds an effect for a key "
                        "with no intent")
    for key, kinds in sorted(alerts.items()):
        for kind in kinds:
            if ev.AlertKind(kind) in FAULT_ALERTS and faults_injected == 0:
                verdict.violate("unexplained_alert", key, f"{kind} without any fault")

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
    }
    return verdict


def _reserving(its: list[ev.Intent], secret: bytes) -> ev.Intent | None:
    """The intent that reserved the key: the first one, in the partition's order, whose
    approval holds (an intent refused for its approval leaves the key absent)."""
    for intent in its:
        if approval_problem(intent, secret, intent.action in APPROVAL_ACTIONS,
                            intent.at_ms) is None:
            return intent
    return None


def _check_effects(verdict: Verdict, key: str, its: list[ev.Intent], status: str,
                   truth: TargetTruth, alerts: Counter[str], secret: bytes) -> None:
    calls = truth.payment_calls.get(key, [])
    rows = truth.credit_rows.get(key, [])
    count = len(calls) + len(rows)
    if count > 1:
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
    reserving = _reserving(its, secret)
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


def _check_alerts(verdict: Verdict, key: str, its: list[ev.Intent], truth: TargetTruth,
                  alerts: Counter[str], secret: bytes) -> None:
    reserving = _reserving(its, secret)
    unapproved = [i for i in its if approval_problem(
        i, secret, i.action in APPROVAL_ACTIONS, i.at_ms) is not None]
    conflicting = [i for i in its if reserving is not None and i not in unapproved
                   and i.args_hash != reserving.args_hash]
    expected = {ev.AlertKind.APPROVAL_MISMATCH.value: bool(unapproved),
                ev.AlertKind.CONFLICTING_ARGUMENTS.value: bool(conflicting)}
    for kind, wanted in expected.items():
        if wanted and not alerts[kind]:
            verdict.violate("missing_alert", key, f"no {kind} alert")
        if alerts[kind] and not wanted:
            verdict.violate("unexplained_alert", key, f"{kind} without such an intent")
    calls = len(truth.payment_calls.get(key, [])) + len(truth.credit_rows.get(key, []))
    if alerts[ev.AlertKind.DUPLICATE_EFFECT.value] and calls < 2:
        verdict.violate("unexplained_alert", key, "duplicate_effect, but the target holds "
                        f"{calls} effect(s)")
    for kind in (ev.AlertKind.EFFECT_WITHOUT_INTENT, ev.AlertKind.POISON_INPUT,
                 ev.AlertKind.EXPIRED_KEY_REUSE, ev.AlertKind.VERSION_MISMATCH):
        if alerts[kind.value]:
            verdict.violate("unexplained_alert", key, f"{kind.value}: no such input was sent")

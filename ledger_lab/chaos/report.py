"""The soak's summary table (the JSON is ``SoakResult.as_dict``)."""

from __future__ import annotations

from typing import Any


def summary(report: dict[str, Any]) -> str:
    rows = [
        ("verdict", "PASS" if report["ok"] else f"FAIL (seed {report['seed']} reproduces it)"),
        ("load", f"{report['load_s']} s at {report['options']['rate']} intents/s asked, "
                 f"{report['rate_held']}/s reached the ledger"),
        ("intents sent / acknowledged / on the topic",
         f"{report['intents_sent']} / {report['intents_acknowledged']} / "
         f"{report['intents_on_topic']}"),
        ("submits refused (not acknowledged)", report["submit_errors"]),
        ("keys", report["keys"]),
        ("keys by state", _pairs(report["keys_by_state"])),
        ("keys by effects at the targets", _pairs(report["keys_by_effect_count"])),
        ("alerts by kind", _pairs(report["alerts_by_kind"]) or "none"),
        *((f"  {kind}, by the fault that explains it", _pairs(causes))
          for kind, causes in report.get("operational_alerts_by_cause", {}).items()),
        ("faults injected", report["faults_injected"]),
        ("faults by kind", _pairs(report["faults_by_kind"])),
        ("faults not fired", len(report["faults_not_fired"])),
        ("slowest start again (s)", _pairs({name: max(seconds) for name, seconds in
                                             report["seconds_to_start_again"].items()})),
        *((f"phase {phase['kind']}", _phase(phase)) for phase in report.get("phases", [])),
        ("dead letters", report.get("dlq_records", 0)),
        ("duplicate effects, alerted (documented window)",
         report["duplicate_effects_alerted"]),
        ("violations", len(report["violations"])),
        ("settled in", f"{report['settle_s']} s after the load"),
    ]
    width = max(len(name) for name, _ in rows)
    lines = [f"{name:<{width}}  {value}" for name, value in rows]
    for violation in report["violations"][:30]:
        lines.append(f"  {violation['kind']}: {violation['key']}: {violation['why']}")
    if len(report["violations"]) > 30:
        lines.append(f"  ... {len(report['violations']) - 30} more in the JSON report")
    return "\n".join(lines)


def _phase(phase: dict[str, Any]) -> str:
    """One phase in a line: when, how long, what it did."""
    d = phase["detail"]
    if phase["kind"] == "growth":
        did = (f"{d['from']} -> {d['to']} partitions, {d['moved_keys']} keys moved, "
               f"{d['kept_keys']} kept, {len(d['repartition_tries'])} tries"
               if d["grown"] else f"not grown: {d['repartition_tries'][-1:]}")
    else:
        did = f"{d['replaced']} instances replaced ({d['to']})"
    return f"at {phase['at_s']:g} s of load, {phase['seconds']:g} s: {did}"


def _pairs(counts: dict[str, Any]) -> str:
    return ", ".join(f"{name} {count}" for name, count in counts.items())

"""The short chaos soak of `make test` (the long one is `make chaos`): one minute of load on
a 3-node cluster with at least 20 faults of every kind, then the checker on ground truth. And the
checker is shown to read the real target: an effect planted at the sandbox afterwards, as a
connector bypassing the ledger would make it, fails the verdict."""

from __future__ import annotations

import sys

import pytest

from ledger_lab.chaos.checker import FaultAt
from ledger_lab.chaos.options import ChaosOptions
from ledger_lab.chaos.plan import FAULT_KINDS
from ledger_lab.chaos.report import summary
from ledger_lab.chaos.soak import check_world, run_soak
from ledger_lab.chaos.world import World

pytestmark = [pytest.mark.timeout(720), pytest.mark.postgres, pytest.mark.own_cluster]


def say(line: str) -> None:
    print(f"[chaos] {line}", file=sys.stderr, flush=True)


def test_a_short_soak_with_every_kind_of_fault_loses_and_duplicates_nothing(tmp_path) -> None:
    planted: dict[str, list[str]] = {}

    def plant_a_second_effect(world: World, faults: list[FaultAt]) -> None:
        """A second call for a paid key, straight to the target: the verdict must see it."""
        assert world.sandbox is not None
        paid = next(e for e in world.sandbox.ledger()["effects"])
        answer = world.sandbox.post_payment(paid["idempotency_key"], paid["body"])
        assert answer.status in (200, 201), answer
        verdict = check_world(world, faults)
        planted[paid["idempotency_key"]] = sorted(
            v["kind"] for v in verdict.violations if v["key"] == paid["idempotency_key"])

    # 24 planned: a broker fault waits until the last killed broker is back and caught up
    # (20 to 40 s here), so one or two of the three or four may not fire within the minute.
    # One growth (6 to 12 partitions through `repartition`) and one rolling upgrade (two
    # processors and two connectors, two passes) in the middle; they hold the schedule.
    options = ChaosOptions(duration_s=60, rate=10, seed=1, faults=24, settle_s=120,
                           connectors=1, grow_by=6, grow_at=0.3, upgrade=True,
                           upgrade_at=0.6)
    result = run_soak(options, tmp_path, say, after=plant_a_second_effect)
    report = result.as_dict()
    say("\n" + summary(report))
    assert result.ok, summary(report)
    assert report["faults_injected"] >= 20
    assert set(report["faults_by_kind"]) == set(FAULT_KINDS)
    assert report["keys_by_state"].get("succeeded", 0) > 100
    assert report["keys_by_state"].get("rejected", 0) > 0
    assert report["alerts_by_kind"].get("conflicting_arguments", 0) > 0
    # The load flowed: agents killed three times (and held through the growth) still
    # submit most of what the asked rate makes in the soak's duration.
    assert report["intents_on_topic"] > 0.4 * options.rate * options.duration_s
    # Both phases ran: every key's state moved to 12 partitions, every member replaced.
    growth, upgrade = report["phases"]
    assert (growth["kind"], growth["detail"]["grown"], growth["detail"]["to"]) == \
        ("growth", True, 12), growth
    assert growth["detail"]["moved_keys"] > 0 and growth["detail"]["kept_keys"] > 0, growth
    assert upgrade["kind"] == "upgrade" and upgrade["detail"]["replaced"] == 8, upgrade
    # Each stopped with SIGTERM exited 0 (None: it was down from an earlier fault).
    assert {r["exit"] for r in upgrade["detail"]["replacements"]} <= {0, None}, upgrade
    assert report["dlq_records"] == 0
    # The planted call is a second effect, made with no grant.
    assert list(planted.values()) == [["call_without_grant", "duplicate_effect"]]

"""The peers arm at a few calls, without Kafka: every peer library installs, protects the
sandbox payment with its durable store and reports positive figures, with one effect per
key at the target. And what each peer does with an unknown outcome (the falsification
runner), pinned: a peer release that changes it fails here."""

from __future__ import annotations

from pathlib import Path

import pytest

from ledger_lab.bench.arms.peers import leaders, measure
from ledger_lab.bench.arms.peers_libs import PEER_NAMES
from ledger_lab.bench.arms.peers_plan import PeersPlan
from ledger_lab.falsify import peers as falsify_peers
from ledger_lab.harness.postgres import PostgresServer

FIGURES = ("fresh_p50_ms", "fresh_p99_ms", "fresh_per_s", "duplicate_p50_ms",
           "duplicate_p99_ms", "duplicate_per_s")


@pytest.mark.timeout(180)
def test_the_peers_arm_protects_the_payment_and_reports_figures(
        tmp_path: Path, postgres_server: PostgresServer) -> None:
    # One SQLite and one PostgreSQL peer: the unknown-outcome test below runs all five.
    peers = ("effect-ledger", "idemkit")
    plan = PeersPlan(levels=(2,), calls_per_agent=1, min_calls=3, repeats=1, peers=peers,
                     ledger=False)
    figures, rss, errors = measure(plan, tmp_path, lambda _: None, postgres=postgres_server)

    # measure() raises unless the target holds exactly one effect per key of each run.
    assert set(figures) == {f"{peer}_2_{name}" for peer in peers for name in FIGURES}
    assert all(value > 0 for value in figures.values()), figures
    assert rss > 0
    assert errors == {}
    ahead = leaders(figures, peers, (2,))
    assert set(ahead) == {f"2_{name}" for name in FIGURES}
    assert set(ahead.values()) <= set(peers)


def test_leaders_pick_the_lowest_latency_and_the_highest_rate() -> None:
    figures = {"a_1_fresh_p50_ms": 30.0, "b_1_fresh_p50_ms": 25.0,
               "a_1_fresh_per_s": 40.0, "b_1_fresh_per_s": 30.0}
    assert leaders(figures, ("a", "b"), (1,)) == {"1_fresh_p50_ms": "b", "1_fresh_per_s": "a"}


@pytest.mark.parametrize(("effects", "requests", "retry_ok", "state", "expected"), [
    (2, 2, True, "", "duplicate effect"),
    (1, 2, True, "", "settles by resending"),
    (1, 1, True, "", "settles by lookup"),
    (1, 1, False, "indeterminate", "stops for an operator"),
    (1, 1, False, "failed", "reports failed"),
])
def test_verdicts(effects: int, requests: int, retry_ok: bool, state: str,
                  expected: str) -> None:
    assert falsify_peers.verdict(effects, requests, retry_ok, state) == expected


@pytest.mark.timeout(180)
def test_what_each_peer_does_with_an_unknown_outcome(postgres_server: PostgresServer) -> None:
    rows = falsify_peers.run_all(postgres=postgres_server)

    got = {(r["peer"], r["target"]): r["verdict"] for r in rows}
    assert got == {
        ("effect-ledger", "deduplicating"): "stops for an operator",
        ("effect-ledger", "not deduplicating"): "stops for an operator",
        ("agent-ledger", "deduplicating"): "reports failed",
        ("agent-ledger", "not deduplicating"): "reports failed",
        ("idemkit", "deduplicating"): "settles by resending",
        ("idemkit", "not deduplicating"): "duplicate effect",
        ("dbos-sqlite", "deduplicating"): "reports failed",
        ("dbos-sqlite", "not deduplicating"): "reports failed",
        ("dbos-postgres", "deduplicating"): "reports failed",
        ("dbos-postgres", "not deduplicating"): "reports failed",
    }, rows
    assert all(not r["first_ok"] for r in rows), "the fault never fired"
    assert {r["peer"] for r in rows} == set(PEER_NAMES)

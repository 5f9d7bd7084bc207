"""The CPU harness replays the bench workload through the processor's real batch loop with
clients that need no broker, and reports every stage; its output digests pin the bytes the
loop produces, so a change to the loop that changes one output byte fails here."""

from __future__ import annotations

import pytest

from ledger_lab.bench.cpu import (
    STAGES,
    digest,
    measure,
    mixed_polls,
    polls_of,
    table,
)
from ledger_lab.bench.workload import WorkloadSpec
from ledger_lab.cli.bench_cmd import _run_cpu
from ledger_lab.fuzz.seeded import POLICY

# What the loop produced for these inputs when the harness was written (before the loop was
# batched): the digest of every output topic's and the changelog's records per partition.
# The mixed stream forwards intents, so it moved once since, with the Intent schema's
# ``observations`` field; both moved with Dispatch.lease_until_ms and AttemptClaim.fenced
# (written without those fields, each is the digest before: 2b6545e7... and 80b6ade5...).
BENCH_DIGEST = "35e6f48315d67b739d94073cdf7544a71e1cb4225458fb69274b45c2728612c3"
MIXED_DIGEST = "99c414a6e5cee5f46e67a2af6f3afa5a066ed75bd56e24b5bf09c8d6fcf883f9"


def test_the_harness_reports_every_stage_of_both_guarantees() -> None:
    result = measure(WorkloadSpec(600, seed=1), 4, 1)
    for name in ("alo", "eos"):
        stages = result[name]["stages_us"]
        assert set(stages) == {*STAGES, "other"}
        for stage in ("decode", "validate", "decide", "encode", "store", "produce"):
            assert stages[stage] > 0, (name, stage)
        assert result[name]["us"] > 0
        assert sum(stages.values()) == pytest.approx(result[name]["us"], rel=0.01)
    assert result["eos"]["stages_us"]["commit"] > 0  # its transaction
    assert result["echo_us"] > 0 and result["floor_us"] > 0
    assert result["alo"]["digest"] == result["eos"]["digest"]
    text = table(result)
    for stage in (*STAGES, "other", "avro echo", "io-floor"):
        assert f"| {stage}" in text


@pytest.mark.parametrize("exactly_once", [False, True])
def test_the_loop_produces_the_bytes_it_always_did(exactly_once: bool) -> None:
    assert digest(polls_of(WorkloadSpec(3000, seed=2), 12), 12, exactly_once) == BENCH_DIGEST
    assert digest(mixed_polls(4000, 7), 4, exactly_once, POLICY) == MIXED_DIGEST


def test_the_command_runs_the_harness(capsys: pytest.CaptureFixture[str], tmp_path) -> None:
    class Args:
        intents, partitions, repeat, seed, out = 300, 2, 1, 1, str(tmp_path / "cpu.json")

    assert _run_cpu(Args()) == 0  # type: ignore[arg-type]
    assert "processor, per decision" in capsys.readouterr().out
    assert (tmp_path / "cpu.json").exists()

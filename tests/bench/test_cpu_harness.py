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
# (written without those fields, each is the digest before: 2b6545e7... and 80b6ade5...),
# and with KeyState.pregrant_until_ms (a state row's last field) and the fuzzer's fenced
# claims. With the pre-grant (off by default), exactly once decides apart: it pre-grants
# first Dispatches (digests under True, at 30 s), at least once never does; exactly once
# with the pre-grant off gives the at-least-once bytes (the delivery changes no output).
# The mixed stream's pre-grant digest moved once more when a key leaving for a
# reconciliation or an operator while a pre-grant nobody took still runs began to wait out
# its end as a lease (transitions.enter; with that rule taken out, the digest is the one
# before: 6a3d842c...). All four moved with the deadline basis's header name
# (``ledger.due.v1`` -> ``v2``: the changelog's headers are in the digest; with ``v1`` the
# digests without a pre-grant are the ones before, 277e8d63... and 9e7b1f17...), and the
# pre-grant's once more with its timers at its end (deadlines.PREGRANT, FENCED: the bench's
# pre-granted RESERVED rows' basis reads ``p``; the mixed stream's also gets the plain
# copies of keys no fenced claim reached, and its fenced holders keep pregrant_until_ms;
# with ``v1`` and those rules taken out, the digests are the ones before, 49204544... and
# 8f245100...). The mixed stream's pre-grant digest moved once more when a key whose
# pre-grant ended with no fenced claim read began to keep the end as a lease (the timer's
# copy, a freeze's hold: lease_until_ms in its rows, for a fenced claim read late; with
# both taken out, it is the one before, 2b92c41b...; judging fenced claims by their own
# record's time changes no byte of these streams).
BENCH_DIGEST = {False: "8896f1c896827aaa4c97b0734478624965a5fb50eb7d982827770c880739971f",
                True: "88bd98ded8a13231fddffc802f795f3ee5002962dedec10390b359416ec30968"}
MIXED_DIGEST = {False: "6495157e988f7f197082953f5196751093ded36ea0f5ed3b496b986f897c39de",
                True: "cbce494d982aea1ac826c3823ea455083aeaa7ea9fc023b1d6c9b281eb0b1270"}


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
    # The delivery changes no byte: with the default settings (no pre-grant) both
    # guarantees give the same outputs; with the pre-grant, exactly once gives its own.
    spec = WorkloadSpec(600, seed=1)
    assert result["alo"]["digest"] == result["eos"]["digest"]
    assert result["eos"]["digest"] == digest(polls_of(spec, 4), 4, True, pregrant_ms=0)
    assert result["eos"]["digest"] != digest(polls_of(spec, 4), 4, True, pregrant_ms=30_000)
    text = table(result)
    for stage in (*STAGES, "other", "avro echo", "io-floor"):
        assert f"| {stage}" in text


@pytest.mark.parametrize("exactly_once", [False, True])
def test_the_loop_produces_the_bytes_it_always_did(exactly_once: bool) -> None:
    bench, mixed = polls_of(WorkloadSpec(3000, seed=2), 12), mixed_polls(4000, 7)
    pregrant = 30_000 if exactly_once else None
    assert digest(bench, 12, exactly_once, pregrant_ms=pregrant) == BENCH_DIGEST[exactly_once]
    assert digest(mixed, 4, exactly_once, POLICY, pregrant) == MIXED_DIGEST[exactly_once]
    if exactly_once:  # the delivery alone changes no byte
        assert digest(bench, 12, True) == BENCH_DIGEST[False]  # the default: no pre-grant
        assert digest(mixed, 4, True, POLICY) == MIXED_DIGEST[False]


def test_the_command_runs_the_harness(capsys: pytest.CaptureFixture[str], tmp_path) -> None:
    class Args:
        intents, partitions, repeat, seed, out = 300, 2, 1, 1, str(tmp_path / "cpu.json")

    assert _run_cpu(Args()) == 0  # type: ignore[arg-type]
    assert "processor, per decision" in capsys.readouterr().out
    assert (tmp_path / "cpu.json").exists()

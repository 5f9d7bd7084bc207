"""The bound on a compiled decision core (ledger_lab/bench/cpu_bound.py) is honest only if
its replayed passes run the same loop: each must write the real loop's outputs byte for
byte, and a replay that does not is refused rather than measured."""

from __future__ import annotations

import pytest

from ledger_lab.bench import cpu, cpu_bound
from ledger_lab.bench.workload import WorkloadSpec
from ledger_stream.domain.transitions import Decision

SPEC = WorkloadSpec(intents=5000, seed=3)  # three polls: later ones read stored rows
PARTITIONS = 4


@pytest.mark.parametrize("exactly_once", [False, True])
def test_every_arm_writes_the_real_loops_outputs(exactly_once: bool) -> None:
    result = cpu_bound.measure(SPEC, PARTITIONS, passes=1, exactly_once=exactly_once)
    # The harness's own pass, unpatched, is the ground truth the replays must match.
    real = cpu.digest(cpu.polls_of(SPEC, PARTITIONS), PARTITIONS, exactly_once)
    assert result["digest"] == real
    for arm in (*cpu_bound.ARMS, "echo"):
        assert result[arm]["us"] > 0
    assert "free decision and codec" in cpu_bound.table(result)


def test_a_replay_that_changes_the_outputs_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    replaying = cpu_bound._replaying

    def without_outputs(name: str, log: list) -> object:
        call = replaying(name, log)
        if name != "decide":
            return call
        return lambda state, *args, **kwargs: Decision(call(state, *args, **kwargs).state)

    monkeypatch.setattr(cpu_bound, "_replaying", without_outputs)
    with pytest.raises(RuntimeError, match="changed the outputs"):
        cpu_bound.measure(SPEC, PARTITIONS, passes=1)


def test_a_pass_count_below_one_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        cpu_bound.main(["--passes", "0"])
    assert exit_.value.code == 2
    assert "--passes must be 1 or more" in capsys.readouterr().err

"""The sdk arm measures a warm broker: a discarded round of the same measurement runs
first, on topics and a folder of its own, and only the last round's figures are reported
(no broker: the measurement itself is replaced)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ledger_lab.bench.arms import sdk
from ledger_lab.bench.context import BenchContext, Sizes


def test_a_discarded_warm_up_round_comes_before_the_measured_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rounds: list[tuple[str, Path, tuple[int, ...]]] = []
    progress: list[tuple[float, float]] = []

    def measure(_bootstrap: str, prefix: str, folder: Path, say: Any,
                **kw: Any) -> tuple[dict[str, float], float]:
        for _ in range(9):  # the lines a round says (status sizes apart)
            say("step")
        rounds.append((prefix, folder, tuple(kw["status_sizes"])))
        return {"round": float(len(rounds))}, 10.0 * len(rounds)

    monkeypatch.setattr(sdk, "measure", measure)
    sizes = Sizes(status_sizes=(0,))
    ctx = BenchContext("127.0.0.1:1", "run", 3, tmp_path, None,  # type: ignore[arg-type]
                       sizes, lambda _label, done, total: progress.append((done, total)))
    result = sdk.SdkArm().run(ctx, 0)
    # Before: one round, on the broker as the arm found it (cold when it ran first).
    assert rounds[0] == ("run-sdk-warm-1", tmp_path / "sdk-warm-1", ())
    assert rounds[-1] == ("run-sdk", tmp_path / "sdk", (0,))
    assert result.figures == {"round": float(len(rounds))}  # the measured round's alone
    assert all(done < total for done, total in progress)

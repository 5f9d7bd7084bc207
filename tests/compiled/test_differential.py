"""The compiled decision core against the pure reference, byte for byte: two processes,
one per core, on the simulation's seeds (every output's Avro bytes, every final row, the
trace: ledger_lab/simulation/differential.py) and on the CPU harness's workloads (every
output topic and the changelog, through the real batch loop). `make test` runs a few
hundred seeds; docs/results/2026-12-06-compiled-core.md records the 100,000-seed run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.compiled.support import needs_build

pytestmark = needs_build

SEEDS = int(os.environ.get("LEDGER_DIFF_SEEDS", "400"))

# The CPU harness's two workloads, both guarantees (the same inputs as its pinned digests).
HARNESS = """
import json
from ledger_lab.bench.cpu import digest, mixed_polls, polls_of
from ledger_lab.bench.workload import WorkloadSpec
from ledger_lab.fuzz.seeded import POLICY
from ledger_stream.core import running
out = {"core": running()}
for eo in (False, True):
    out[f"bench-{eo}"] = digest(polls_of(WorkloadSpec(3000, seed=2), 12), 12, eo)
    out[f"mixed-{eo}"] = digest(mixed_polls(4000, 7), 4, eo, POLICY)
print(json.dumps(out))
"""


def _start(core: str, args: list[str]) -> subprocess.Popen[str]:
    env = {**os.environ, "LEDGER_CORE": core}
    return subprocess.Popen([sys.executable, *args], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _both(args: list[str]) -> dict[str, str]:
    """stdout of ``args`` under each core (run side by side)."""
    procs = {core: _start(core, args) for core in ("pure", "compiled")}
    outs = {}
    for core, proc in procs.items():
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err
        outs[core] = out
    return outs


def test_the_simulation_seeds_give_the_same_bytes_in_both_cores(tmp_path: Path) -> None:
    args = ["-m", "ledger_lab.simulation.differential", "--count", str(SEEDS)]
    runs = {core: _start(core, [*args, "--out", str(tmp_path / core)])
            for core in ("pure", "compiled")}
    summaries = {}
    for core, proc in runs.items():
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err
        summaries[core] = json.loads(out)
        assert summaries[core]["running"] == core
    pure = (tmp_path / "pure").read_text().split()
    compiled = (tmp_path / "compiled").read_text().split()
    assert len(pure) == SEEDS
    differing = [seed for seed, (a, b) in enumerate(zip(pure, compiled, strict=True)) if a != b]
    assert not differing, f"seeds whose outputs differ between the cores: {differing[:20]}"


def test_the_harness_workloads_give_the_same_bytes_in_both_cores() -> None:
    outs = {core: json.loads(out) for core, out in _both(["-c", HARNESS]).items()}
    assert outs["pure"].pop("core") == "pure"
    assert outs["compiled"].pop("core") == "compiled"
    assert outs["pure"] == outs["compiled"]

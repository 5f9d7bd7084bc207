"""The coverage-guided engine's harness (ledger_lab/fuzz/coverage.py): its input layout, its
corpus of valid records, and that a record breaking a promise raises. The engine itself runs in
`make fuzz` (`ledger-stream fuzz --engine atheris`): instrumenting the code takes about a
minute, too long for the suite (docs/reliability.md has its runs)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ledger_lab.fuzz import seeded as fuzz
from ledger_lab.fuzz.coverage import (
    Harness,
    PromiseBroken,
    frame,
    planted_step,
    write_corpus,
)
from ledger_stream.domain import events as ev
from ledger_stream.domain.keys import args_hash, canonical_json

pytestmark = pytest.mark.timeout(60)


def test_the_layout_and_the_corpus(tmp_path: Path) -> None:
    write_corpus(tmp_path, count=50)
    seeds = sorted(tmp_path.iterdir())
    assert len(seeds) >= 40
    harness = Harness()
    for seed in seeds:  # valid records go through without breaking a promise
        harness.one(seed.read_bytes())
    assert harness.report.kinds["decided"] > 0
    lax = Harness(planted_step_for_test())
    args = {"amount": 5}
    payout = ev.Intent("i-1", "acme/payout/k1", "acme", "payout", "t", canonical_json(args),
                       args_hash(args), ev.Workflow("g", "1"), fuzz.BASE_MS)
    with pytest.raises(PromiseBroken, match="no valid approval"):
        lax.one(frame(fuzz.INTENTS, b"acme/payout/k1", lax.codec.encode(payout)))


def planted_step_for_test():
    os.environ["LEDGER_FUZZ_PLANT"] = "lax-approval"
    try:
        return planted_step()
    finally:
        del os.environ["LEDGER_FUZZ_PLANT"]

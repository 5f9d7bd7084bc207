"""The submit timeline tool: its flags, and how records land on a submit's timeline."""

from __future__ import annotations

import time

import pytest

from ledger_lab.bench.submit_hops import CpuMeter, hops
from ledger_lab.bench.submit_timeline import DONE, main, place


def test_bad_flags_are_refused_with_a_reason(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--calls", "0"])
    assert exit_.value.code == 2
    assert "--calls must be at least 1" in capsys.readouterr().err
    for flag in ("--call-ms", "--gap-ms", "--warm-up", "--pregrant-ms"):
        with pytest.raises(SystemExit):
            main([flag, "-1"])
        assert f"{flag} must not be negative (got -1)" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--guarantee", "twice"])
    assert "invalid choice" in capsys.readouterr().err


def test_records_land_on_their_submit_by_time_and_a_duplicate_keeps_only_its_answer() -> None:
    found = {
        b"k/dup": [(1_010, "intents", "Intent", "e1"), (1_012, "receipts", "Receipt", "e1"),
                   (2_003, "intents", "Intent", "e2"), (2_009, "receipts", "Receipt", "e2")],
        b"k/new": [(3_000, "intents", "Intent", "e3"), (3_002, "receipts", "Receipt", "e3"),
                   (3_001, "dispatch", "Dispatch", "e3"), (3_040, "receipts", "Receipt", "e3")],
    }
    steps = place(found, [("duplicate", "k/dup", "e2", 2.0, 2.015),
                          ("fresh", "k/new", "e3", 3.0, 3.05)])
    assert steps["duplicate"] == {"Intent on intents": [3.0], "Receipt on receipts": [9.0],
                                  DONE: [pytest.approx(15.0)]}
    assert list(steps["fresh"]) == ["Intent on intents", "Dispatch on dispatch",
                                    "Receipt on receipts", "Receipt on receipts (2)", DONE]
    assert steps["fresh"]["Receipt on receipts (2)"] == [40.0]


def test_a_cached_duplicate_keeps_only_its_answer_too() -> None:
    found = {b"k/dup": [(1_010, "intents", "Intent", "e1"), (1_012, "receipts", "Receipt", "e1"),
                        (2_003, "intents", "Intent", "e2"), (2_009, "receipts", "Receipt", "e2")]}
    steps = place(found, [("duplicate (cache)", "k/dup", "e2", 2.0, 2.0001)])
    assert steps["duplicate (cache)"]["Receipt on receipts"] == [9.0]


def test_hops_split_each_step_into_its_writer_and_its_commit() -> None:
    made = {"Intent": [1.0], "Dispatch": [5.0], "Receipt": [5.0], "Claim": [30.0],
            DONE: [60.0]}
    seen = {"Intent": [3.0], "Dispatch": [20.0], "Receipt": [20.0], "Claim": [31.0]}
    assert hops(made, seen) == [
        ("submit start -> Intent handed over", {"ms": 1.0}),
        ("Intent: handed over -> readable", {"ms": 2.0}),
        ("Intent readable -> Dispatch handed over", {"ms": 2.0}),
        ("Dispatch: handed over -> readable", {"ms": 15.0}),  # the Receipt: same batch
        ("Dispatch readable -> Claim handed over", {"ms": 10.0}),
        ("Claim: handed over -> readable", {"ms": 1.0}),
        (f"Claim readable -> {DONE} handed over", {"ms": 29.0})]


def test_the_cpu_meter_reads_this_process_from_proc() -> None:
    meter = CpuMeter({}, None)
    meter.start()
    deadline = time.process_time() + 0.1
    while time.process_time() < deadline:
        pass
    meter.stop()
    assert 0.05 <= meter.used["client"] <= 1.0


def test_the_submits_return_is_a_hop_even_before_the_reader_saw_the_receipt() -> None:
    made = {"Receipt": [10.0], DONE: [11.0]}
    assert hops(made, {"Receipt": [12.0]})[-1] == (f"Receipt readable -> {DONE} handed over",
                                                   {"ms": -1.0})

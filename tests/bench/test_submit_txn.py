"""The transaction floor tool: its flags, its refusal count, and one short run."""

from __future__ import annotations

import pytest

from ledger_lab.bench.submit_txn import Rig, _Refusals, main, measure


def test_bad_flags_are_refused_with_a_reason(capsys: pytest.CaptureFixture[str]) -> None:
    for argv, reason in ((["--rounds", "0"], "--rounds and --topics must be at least 1"),
                         (["--topics", "0"], "--rounds and --topics must be at least 1"),
                         (["--pause-ms", "-1"], "--pause-ms not negative"),
                         (["--client-set", "nagle"], "take KEY=VALUE"),
                         (["--broker-set", "a=1", "--client-set", "b=2"], "one at a time"),
                         (["--alternate", "--client-set", "b=2"], "one at a time")):
        with pytest.raises(SystemExit) as exit_:
            main(argv)
        assert exit_.value.code == 2
        assert reason in capsys.readouterr().err


def test_only_the_coordinators_concurrent_transactions_answers_are_counted() -> None:
    refusals = _Refusals()
    refusals.logger.debug("ADDPARTS [rdkafka#producer-3] [thrd:main]: TxnCoordinator/1: "
                          "AddPartitionsToTxn response: partition \"t\": [0]: Broker: "
                          "Producer attempted to update a transaction while another "
                          "concurrent operation on the same transaction was ongoing")
    refusals.logger.debug("ADDPARTS [rdkafka#producer-3] [thrd:main]: t [0] registered with "
                          "transaction")
    assert refusals.count == 1 and refusals.lines == 2
    assert refusals.logger.propagate is False  # its debug lines stay out of the logs


def test_a_short_run_times_every_step_and_sees_every_record(kafka_bootstrap: str) -> None:
    rig = Rig(kafka_bootstrap, [50], topics=2, client={})
    found = measure({"": rig}, rounds=3, pause_s=0.0)
    assert set(found["steps"]) == {"txn produce+flush", "txn send_offsets", "txn commit",
                                   "txn total", "plain produce+flush"}
    assert set(found["readable"]) == {"txn readable, fetch.wait.max.ms=50",
                                      "plain readable, fetch.wait.max.ms=50"}
    assert found["transactions_per_rig"] == 3
    # Back-to-back transactions on one id may or may not be refused: what must hold is that
    # the count listened to the producers' transaction lines, and is the one reported.
    assert rig.refusals.lines > 0, "no eos debug line reached the refusal count"
    assert found["refused"] == {"CONCURRENT_TRANSACTIONS answers": rig.refusals.count}

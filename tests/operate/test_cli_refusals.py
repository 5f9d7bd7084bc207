"""The freeze, unfreeze and watch commands refuse what they cannot do with one line, never a
traceback or a loop without pause (found by a hostile review, 2026-12-05): no Kafka
configured, a Kafka that does not answer, a wait or interval of NaN or infinity; and every
command that talks to Kafka says in one line that it does not answer. No broker: nothing
here reaches one."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from ledger_stream.cli.main import main

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(autouse=True)
def no_kafka(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.delenv("LEDGER_KAFKA_BOOTSTRAP", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no `kafka up` state to find
    monkeypatch.chdir(tmp_path)


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(argv)
    return code, capsys.readouterr().err


@pytest.mark.parametrize("argv", [
    ["freeze", "refund", "--reason", "x", "--wait", "0"],
    ["unfreeze", "refund", "--wait", "0"],
    ["watch", "sandbox", "--name", "sandbox", "--base-url", "http://127.0.0.1:1"],
])
def test_no_kafka_configured_is_one_line(argv: list[str], capsys) -> None:
    code, err = run(argv, capsys)
    assert code == 2 and err.startswith("ledger-stream: error: no Kafka"), err


def test_a_kafka_that_does_not_answer_is_one_line(capsys) -> None:
    code, err = run(["freeze", "refund", "--reason", "x", "--wait", "0",
                     "--bootstrap", "127.0.0.1:1"], capsys)
    assert code == 2 and "cannot reach Kafka at 127.0.0.1:1" in err, err


@pytest.mark.parametrize("value", ["nan", "inf", "-1"])
def test_a_freeze_wait_that_never_ends_is_refused(value: str, capsys) -> None:
    with pytest.raises(SystemExit) as exit_:  # argparse refuses it
        main(["freeze", "refund", "--reason", "x", "--wait", value])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "argument --wait:" in err, err
    assert "0 or more and at most 3600" in err, err


@pytest.mark.parametrize(("argv", "says"), [
    (["freeze", "refund", "--reason", "x", "--wait", "soon"],
     "argument --wait: 'soon' is not a number of seconds"),
    (["freeze", "refund", "--reason", "x", "--wait", "-1"],
     "argument --wait: '-1': seconds must be 0 or more and at most 3600"),
    (["reconcile", "resolve", "a/refund/x", "--failed", "--attempt", "one", "--reason", "r"],
     "argument --attempt: 'one' is not a whole number"),
    (["reconcile", "resolve", "a/refund/x", "--failed", "--attempt", "0", "--reason", "r"],
     "argument --attempt: 0 is not from 1 to 2147483647"),
])
def test_a_number_flag_is_refused_in_one_line_saying_what_it_takes(
        argv: list[str], says: str, capsys) -> None:
    """The seconds and count types' lines, word for word (they share one parser)."""
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and err.endswith(f"error: {says}\n"), err


@pytest.mark.parametrize("value", ["nan", "inf", "0", "1e300"])
def test_a_watch_interval_without_a_pause_or_past_a_day_is_refused(value: str, capsys) -> None:
    with pytest.raises(SystemExit) as exit_:  # argparse refuses it
        main(["watch", "sandbox", "--name", "s", "--base-url", "http://127.0.0.1:1",
              "--interval", value])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "argument --interval:" in err, err
    assert "more than 0 and at most 86400" in err, err


@pytest.mark.parametrize(("template", "says"), [
    ("{", "Single '{' encountered"), ("{a.__class__}", "(not {a.__class__})"),
    ("{0}", "(not {0})"), ("acme/refund/x", "and one at least"),
    ("refund/{invoice}", "makes no operation key"),
])
def test_a_watch_key_template_that_makes_no_key_is_refused_at_start(
        template: str, says: str, capsys) -> None:
    # Accepted before, it filed every effect made around the ledger under unmapped/...
    # (found by the hostile review of 2026-12-07).
    code, err = run(["watch", "sandbox", "--name", "s", "--base-url", "http://127.0.0.1:1",
                     "--key-template", template], capsys)
    assert code == 2 and err.startswith(f"ledger-stream: error: --key-template {template!r}")
    assert says in err and err.count("\n") == 1, err


def test_a_freeze_the_processor_would_refuse_is_refused_before_it_is_sent(capsys) -> None:
    # Each partition's processor dead-letters a Containment with a field over 500
    # characters; the command reported it "in force" (found by the hostile review). Refused
    # here before Kafka is asked anything (the bootstrap does not answer).
    code, err = run(["freeze", "refund", "--reason", "x", "--operator", "o" * 501,
                     "--wait", "0", "--bootstrap", "127.0.0.1:1"], capsys)
    assert code == 2 and "operator longer than 500 characters" in err, err


# Every command that reads or writes Kafka and runs to an end, given a Kafka that does not
# answer (found by the hostile review of 2026-12-07: `reconcile list`, `reconcile resolve`
# and `freezes` ended in a KafkaException traceback). The services (processor, connector,
# view, api, watch, mcp) are left out: they wait for Kafka at start-up by design.
UNREACHABLE = "127.0.0.1:1"
ROOT = Path(__file__).resolve().parents[2]
TALKS_TO_KAFKA: list[list[str]] = [
    ["topics", "create"], ["acls", "apply", "--principal", "processor=User:p"],
    ["receipts", "a/refund/x"], ["alerts"], ["inspect", "a/refund/x"],
    ["evidence", "a/refund/x", "--out", "{tmp}/evidence.json"], ["reconcile", "list"],
    ["reconcile", "resolve", "a/refund/x", "--failed", "--attempt", "1", "--reason", "r"],
    ["freeze", "refund", "--reason", "r", "--wait", "0"], ["unfreeze", "refund", "--wait", "0"],
    ["freezes"], ["approve", "a/refund/x"], ["repartition", "--to", "24"],
    ["drain", "--graph", "g", "--version", "v"],
    ["drain", "--graph", "g", "--version", "v", "--hold"],
    ["upgrade-check", "--graph", "examples.refund_agent.upgrades:refund_v1",
     "--checkpointer", "{tmp}/checkpoints.sqlite", "--lag-wait", "1"],
]


@pytest.fixture(scope="module")
def unreachable_runs(tmp_path_factory: pytest.TempPathFactory
                     ) -> dict[str, subprocess.CompletedProcess[str]]:
    """Each command of TALKS_TO_KAFKA run at once, as its own process (the slowest waits
    about 30 s for an answer that never comes), by its command line."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    tmp = tmp_path_factory.mktemp("unreachable")
    SqliteSaver(sqlite3.connect(tmp / "checkpoints.sqlite")).setup()
    env = {name: value for name, value in os.environ.items() if not name.startswith("LEDGER_")}
    env.update(HOME=str(tmp), LEDGER_DEV_MODE="1", LEDGER_KAFKA_TIMEOUT_S="1",
               LEDGER_KAFKA_BOOTSTRAP=UNREACHABLE)  # the graph's own client reads it
    started = {" ".join(argv): subprocess.Popen(
        [sys.executable, "-m", "ledger_stream.cli.main",
         *[arg.format(tmp=tmp) for arg in argv], "--bootstrap", UNREACHABLE],
        env=env, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True) for argv in TALKS_TO_KAFKA}
    done = {}
    for name, proc in started.items():
        try:
            out, err = proc.communicate(timeout=150)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        done[name] = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    return done


@pytest.mark.timeout(240)
@pytest.mark.parametrize("argv", TALKS_TO_KAFKA, ids=[" ".join(a[:2]) for a in TALKS_TO_KAFKA])
def test_a_kafka_that_does_not_answer_is_one_line_for_every_command(
        argv: list[str], unreachable_runs: dict[str, subprocess.CompletedProcess[str]]) -> None:
    run = unreachable_runs[" ".join(argv)]
    said = [line for line in run.stderr.splitlines()
            if not line.startswith("{")]  # the JSON lines are the client's own log
    assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr[-2000:]
    # One line, the client's own words for the failure (not another refusal).
    assert len(said) == 1 and said[0].startswith("ledger-stream: error: "), said
    assert "Local: " in said[0], said

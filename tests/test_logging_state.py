"""A test that changes the process's logging leaves none of it to the next test
(tests/logging_state.py). The two tests run in file order: the first changes logging the
way in-process commands do, the second checks nothing of it is left."""

from __future__ import annotations

import logging

import pytest

from ledger_stream.cli.main import main

pytestmark = pytest.mark.timeout(60)

QUIET = "tests.logging_state.quiet"
FRESH = "tests.logging_state.fresh"
BEFORE: dict[str, object] = {}


def _root() -> tuple[int, list[logging.Handler]]:
    """The root's level and its handlers, less the ones pytest adds for each test phase."""
    return logging.root.level, [h for h in logging.root.handlers
                                if not type(h).__module__.startswith("_pytest")]


def test_a_command_changes_the_process_logging(capsys: pytest.CaptureFixture[str]) -> None:
    BEFORE["root"] = _root()
    assert main(["fuzz", "--cases", "50", "--seed", "1", "--json"]) == 0  # quiets the processor
    capsys.readouterr()
    assert logging.getLogger("ledger_stream.processor").level == logging.WARNING
    quiet = logging.getLogger(QUIET)
    quiet.setLevel(logging.CRITICAL)
    quiet.propagate = False
    quiet.addHandler(logging.NullHandler())
    logging.getLogger(FRESH).setLevel(logging.ERROR)
    logging.root.handlers[:] = [logging.NullHandler()]
    logging.root.setLevel(logging.DEBUG)
    logging.disable(logging.ERROR)


def test_the_next_test_finds_logging_as_it_was(caplog: pytest.LogCaptureFixture) -> None:
    assert logging.root.manager.disable == logging.NOTSET
    assert _root() == BEFORE["root"]
    assert logging.getLogger("ledger_stream.processor").level == logging.NOTSET
    assert logging.getLogger(FRESH).level == logging.NOTSET
    quiet = logging.getLogger(QUIET)
    assert quiet.level == logging.NOTSET and not quiet.disabled
    caplog.set_level("INFO")
    logging.getLogger("ledger_stream.processor.policy").info("heard")
    assert "heard" in caplog.text

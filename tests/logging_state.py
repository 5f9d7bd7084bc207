"""Each test leaves the process's logging as it found it.

Many tests run a command in-process (``ledger_stream.cli.main.main``). A command is a
process entry point, and configuring the process's logging is its job: ``configure_logging``
replaces the root handlers and sets the root level, ``ledger-stream fuzz`` quiets
``ledger_stream.processor`` to WARNING. In a test session that state would outlive the test
and silence or redirect the logs a later test captures. So around every test (setup, call
and teardown) this plugin records the root logger, every named logger's level, propagate
flag, disabled flag and handlers, and ``logging.disable``'s level, and puts them back after.

It wraps ``pytest_runtest_protocol`` rather than being a fixture: the snapshot is then taken
before pytest's logging plugin adds its per-phase capture handlers, so restoring never
re-attaches a finished phase's handler. A logger first created during the test (a module
imported lazily, or a placeholder turned into a logger by ``getLogger``) gets its level back
to NOTSET and is re-enabled; its propagate flag and handlers are left as its module set them
at import.

A fixture wider than a test (module or session scope) is set up inside the protocol of the
first test that uses it, so a logging change it makes is undone after that test: such a
fixture must not configure logging (none does; the brokers' probe logger is quieted by its
module at import, which is kept).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass

import pytest


@dataclass(frozen=True)
class _LoggerState:
    level: int
    propagate: bool
    disabled: bool
    handlers: tuple[logging.Handler, ...]

    @classmethod
    def of(cls, logger: logging.Logger) -> _LoggerState:
        return cls(logger.level, logger.propagate, logger.disabled, tuple(logger.handlers))

    def restore(self, logger: logging.Logger) -> None:
        logger.setLevel(self.level)
        logger.propagate = self.propagate
        logger.disabled = self.disabled
        logger.handlers[:] = self.handlers


def _named_loggers() -> dict[str, logging.Logger]:
    return {name: logger for name, logger in logging.root.manager.loggerDict.items()
            if isinstance(logger, logging.Logger)}


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    root = _LoggerState.of(logging.root)
    named = {name: _LoggerState.of(logger) for name, logger in _named_loggers().items()}
    disabled_below = logging.root.manager.disable
    yield
    logging.disable(disabled_below)
    root.restore(logging.root)
    for name, logger in _named_loggers().items():
        if name in named:
            named[name].restore(logger)
        else:
            logger.setLevel(logging.NOTSET)
            logger.disabled = False

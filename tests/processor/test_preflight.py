"""Which input topic clocks the processor trusts as its partition clock."""

from __future__ import annotations

import pytest

from ledger_stream.processor.preflight import timestamp_problem

pytestmark = pytest.mark.timeout(30)

BOUND = 60_000


def test_log_append_time_is_trusted_whatever_the_bounds() -> None:
    config = {"message.timestamp.type": "LogAppendTime",
              "message.timestamp.before.max.ms": str(2**63 - 1)}
    assert timestamp_problem("t.intents", config, BOUND) is None


def test_create_time_is_trusted_only_within_the_skew_bound() -> None:
    bounded = {"message.timestamp.type": "CreateTime",
               "message.timestamp.before.max.ms": "60000",
               "message.timestamp.after.max.ms": "30000"}
    assert timestamp_problem("t.intents", bounded, BOUND) is None
    problem = timestamp_problem("t.intents", {**bounded,
                                              "message.timestamp.after.max.ms": "3600000"},
                                BOUND)
    assert problem is not None
    assert "message.timestamp.after.max.ms" in problem
    assert "message.timestamp.before.max.ms" not in problem.split("(", 1)[1].split(")")[0]
    assert "message.timestamp.type=LogAppendTime" in problem
    assert "\n" not in problem


def test_missing_bounds_count_as_unbounded() -> None:
    problem = timestamp_problem("t.attempts", {"message.timestamp.type": "CreateTime"}, BOUND)
    assert problem is not None and "t.attempts uses CreateTime" in problem

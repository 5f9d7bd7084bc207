"""Which input topic clocks the processor trusts as its partition clock."""

from __future__ import annotations

import pytest

from ledger_stream.config import Settings
from ledger_stream.processor.preflight import clock_bound, timestamp_problem

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


def test_with_the_pre_grant_on_client_clocks_are_bounded_by_the_skew_margin() -> None:
    """A claim is judged by its own record's time against the pre-grant's end, with the
    skew margin for clocks that differ: CreateTime within clock_skew_bound_ms but beyond
    clock_skew_ms is accepted without the pre-grant and refused with it."""
    settings = Settings(processor={"clock_skew_ms": 2_000, "clock_skew_bound_ms": 60_000})
    assert clock_bound(settings, pregranted=False) == (60_000, "clock_skew_bound_ms")
    bound, name = clock_bound(settings, pregranted=True)
    assert bound == 2_000 and name.startswith("clock_skew_ms")
    config = {"message.timestamp.type": "CreateTime",
              "message.timestamp.before.max.ms": "30000",
              "message.timestamp.after.max.ms": "2000"}
    assert timestamp_problem("t.attempts", config, *clock_bound(settings, False)) is None
    problem = timestamp_problem("t.attempts", config, *clock_bound(settings, True))
    assert problem is not None and "clock_skew_ms (the pre-grant is on)=2000" in problem
    assert "message.timestamp.before.max.ms" in problem
    assert "message.timestamp.after.max.ms" not in problem.split("(", 2)[2].split(")")[0]
    # A skew margin wider than the bound changes nothing.
    wide = Settings(processor={"clock_skew_ms": 90_000, "clock_skew_bound_ms": 60_000})
    assert clock_bound(wide, pregranted=True) == (60_000, "clock_skew_bound_ms")


def test_a_controller_that_went_away_is_asked_again_not_refused(monkeypatch) -> None:
    """Found by the chaos soak: a processor starting while the active controller was down
    refused to start on "Timed out waiting for controller"."""
    from confluent_kafka import KafkaError, KafkaException

    from ledger_stream.processor import preflight
    from ledger_stream.processor.exceptions import StartupRefused

    class Entry:
        value = "LogAppendTime"

    class Done:
        def result(self, timeout):
            return {"message.timestamp.type": Entry()}

    class Failing:
        def __init__(self, code):
            self.code = code

        def result(self, timeout):
            raise KafkaException(KafkaError(self.code, "no controller"))

    class Admin:
        def __init__(self, answers):
            self.answers = list(answers)

        def describe_configs(self, resources, request_timeout):
            return {resources[0]: self.answers.pop(0)}

    monkeypatch.setattr(preflight.time, "sleep", lambda s: None)
    admin = Admin([Failing(KafkaError._TIMED_OUT), Done()])
    assert preflight._describe(admin, "t.intents", 1)["message.timestamp.type"] \
        == "LogAppendTime"
    with pytest.raises(StartupRefused, match="describing topic t.intents failed"):
        preflight._describe(Admin([Failing(KafkaError.TOPIC_AUTHORIZATION_FAILED)]),
                            "t.intents", 1)
    with pytest.raises(StartupRefused):
        preflight._describe(Admin([Failing(KafkaError._TIMED_OUT)] * 4), "t.intents", 1)

    class Silent:  # found by the soak too: a broker restarting answered nothing in time
        def result(self, timeout):
            raise TimeoutError

    assert preflight._describe(Admin([Silent(), Silent(), Done()]), "t.intents", 1) \
        ["message.timestamp.type"] == "LogAppendTime"
    with pytest.raises(StartupRefused, match="no answer within 1 s"):
        preflight._describe(Admin([Silent()] * 4), "t.intents", 1)


def test_topics_just_created_are_waited_for_then_missing_ones_refused(monkeypatch) -> None:
    """Found in a CI run: a processor started right after its topics were created saw none
    of them in the broker's metadata and refused to start ("missing topics ...")."""
    from ledger_stream.processor import preflight

    class Listing:
        def __init__(self, topics):
            self.topics = topics

    class Admin:
        def __init__(self, answers):
            self.answers = list(answers)
            self.asked = 0

        def list_topics(self, timeout):
            self.asked += 1
            return Listing(self.answers.pop(0) if len(self.answers) > 1 else self.answers[0])

    monkeypatch.setattr(preflight.time, "sleep", lambda s: None)
    late = Admin([{}, {"t.a": 1}, {"t.a": 1, "t.b": 2}])
    found, missing = preflight.listed_topics(late, ["t.a", "t.b"], 1, patience_s=60)
    assert (missing, late.asked, sorted(found)) == ([], 3, ["t.a", "t.b"])
    never = Admin([{"t.a": 1}])
    clock = iter(range(0, 1000, 1))
    monkeypatch.setattr(preflight.time, "monotonic", lambda: next(clock))
    _, missing = preflight.listed_topics(never, ["t.a", "t.b"], 1, patience_s=5)
    assert missing == ["t.b"] and never.asked > 1


@pytest.mark.kafka
def test_group_timeouts_the_brokers_refuse_are_a_warning_not_a_refusal(
        kafka_bootstrap: str, caplog: pytest.LogCaptureFixture) -> None:
    """KIP-848 group configuration: below the brokers' minimum (the local cluster allows 6 s
    and 1 s) the group keeps the brokers' defaults and the processor says so."""
    import uuid

    from confluent_kafka.admin import AdminClient

    from ledger_stream.processor.preflight import configure_group

    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    group = f"preflight-{uuid.uuid4().hex[:8]}"
    assert configure_group(admin, group, {"consumer.session.timeout.ms": "7000",
                                          "consumer.heartbeat.interval.ms": "1000"}, 30)
    assert not configure_group(admin, group, {"consumer.session.timeout.ms": "2000"}, 30)
    warning = [r for r in caplog.records if "refused the group's session timeout" in r.message]
    assert len(warning) == 1 and warning[0].levelname == "WARNING"
    assert "group.consumer.min.session.timeout.ms" in warning[0].message

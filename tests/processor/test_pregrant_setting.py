"""The pre-grant setting (``LEDGER_PREGRANT_LEASE_MS``): the decision policy carries it only
under exactly once. At least once can write one Dispatch twice after a crash, and two
records of one pre-grant could be fenced by two connectors, so it never pre-grants."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ledger_stream.config import Settings
from ledger_stream.domain import absent, decide
from ledger_stream.domain import events as ev
from ledger_stream.processor.policy import (
    ConfigError,
    describe,
    policy_from,
    policy_revision,
    under_guarantee,
)
from tests.factories import KEY, intent

pytestmark = pytest.mark.timeout(30)


def _first_dispatch(settings: Settings) -> ev.Dispatch:
    """The Dispatch the processor's policy decides for a fresh key's intent at 1,000."""
    decision = decide(absent(KEY), intent(at_ms=1_000), policy_from(settings), 1_000)
    (dispatch,) = [o for o in decision.outputs if isinstance(o, ev.Dispatch)]
    return dispatch


def test_the_pre_grant_is_off_by_default():
    """Off until the processor's timers act at a pre-grant's end (docs/connectors.md, 'Why
    it is off by default'): a crashed connector's fenced record waits for the stall timer."""
    assert Settings().processor.processing_guarantee == "exactly-once"
    assert policy_from(Settings()).pregrant_lease_ms == 0
    assert _first_dispatch(Settings()).lease_until_ms == 0


def test_exactly_once_pre_grants_when_asked():
    settings = Settings(pregrant_lease_ms=30_000)
    assert settings.processor.processing_guarantee == "exactly-once"
    assert policy_from(settings).pregrant_lease_ms == 30_000
    assert _first_dispatch(settings).lease_until_ms == 31_000


def test_the_environment_sets_it_and_0_turns_it_off(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("LEDGER_PREGRANT_LEASE_MS", "12000")
    assert _first_dispatch(Settings()).lease_until_ms == 13_000
    monkeypatch.setenv("LEDGER_PREGRANT_LEASE_MS", "0")
    assert _first_dispatch(Settings()).lease_until_ms == 0


@pytest.mark.parametrize("lease_ms", [30_000, 12_000])
def test_at_least_once_never_pre_grants(lease_ms: int):
    settings = Settings(processing_guarantee="at-least-once", pregrant_lease_ms=lease_ms)
    assert policy_from(settings).pregrant_lease_ms == 0
    assert _first_dispatch(settings).lease_until_ms == 0


def test_a_policy_given_to_an_at_least_once_processor_loses_its_pre_grant_and_revision():
    """What ``Processor.__init__`` does with a policy built by its caller: the revision is
    the one of the knobs it decides under."""
    given = policy_from(Settings(pregrant_lease_ms=30_000))
    assert given.pregrant_lease_ms == 30_000
    taken = under_guarantee(given, "at-least-once")
    assert taken.pregrant_lease_ms == 0
    assert taken.revision == policy_revision(replace(given, pregrant_lease_ms=0))
    assert taken.revision != given.revision
    assert under_guarantee(given, "exactly-once") is given


def test_a_negative_lease_is_refused():
    with pytest.raises(ValueError, match="pregrant_lease_ms"):
        Settings(pregrant_lease_ms=-1)


def test_a_processor_writing_an_older_releases_dispatch_does_not_pre_grant(
        monkeypatch: pytest.MonkeyPatch):
    """The first pass of an upgrade (``LEDGER_WRITE_SCHEMAS``): the Dispatch it writes
    cannot carry the pre-grant, so no connector could take it, and a plain claim would wait
    for its end for nothing."""
    from ledger_stream.serde import AvroCodec
    from ledger_stream.serde.schemas import SCHEMA_DIR, SchemaSet

    given = policy_from(Settings(pregrant_lease_ms=30_000))
    assert under_guarantee(given, "exactly-once", AvroCodec()) is given
    older = AvroCodec(SchemaSet.load(SCHEMA_DIR, "0.1.0"))
    assert "lease_until_ms" not in older.schemas.writer("Dispatch").fields
    taken = under_guarantee(given, "exactly-once", older)
    assert taken.pregrant_lease_ms == 0 and taken.revision != given.revision
    assert "pre-grant off" in describe(taken) and "pre-grant 30000 ms" in describe(given)


@pytest.mark.parametrize(("lease_ms", "stall_ms", "skew_ms"), [
    (30_000, 5_000, 2_000),  # the stall timer inside the pre-grant (found 2026-12-06)
    (28_000, 30_000, 2_000),  # ends with the pre-grant plus the skew margin: not after it
    (30_000, 30_000, 0),
])
def test_a_pre_grant_not_ending_before_the_stall_timer_refuses_to_start(
        lease_ms: int, stall_ms: int, skew_ms: int):
    """Counted from the Dispatch, the stall timer would fall no later than the pre-grant's
    end plus the skew margin, where the plain copy is offered. The processor refuses to
    start, naming both settings."""
    settings = Settings(pregrant_lease_ms=lease_ms, stall_after_ms=stall_ms,
                        clock_skew_ms=skew_ms)
    with pytest.raises(ConfigError, match="LEDGER_PREGRANT_LEASE_MS .*LEDGER_STALL_AFTER_MS"):
        policy_from(settings)


def test_a_pre_grant_ending_before_the_stall_timer_starts():
    settings = Settings(pregrant_lease_ms=27_999, stall_after_ms=30_000, clock_skew_ms=2_000)
    assert policy_from(settings).pregrant_lease_ms == 27_999
    # Without a pre-grant (off, or at least once, which never pre-grants) any stall_after.
    assert policy_from(Settings(stall_after_ms=1_000)).pregrant_lease_ms == 0
    at_least_once = Settings(processing_guarantee="at-least-once", pregrant_lease_ms=30_000,
                             stall_after_ms=5_000)
    assert policy_from(at_least_once).pregrant_lease_ms == 0


def test_the_processor_command_refuses_it_with_the_settings_named(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    """What an operator sees: the command exits before it connects anywhere."""
    from ledger_stream.cli.main import main

    monkeypatch.setenv("LEDGER_PREGRANT_LEASE_MS", "30000")
    monkeypatch.setenv("LEDGER_STALL_AFTER_MS", "5000")
    monkeypatch.setenv("LEDGER_DEV_MODE", "1")
    # An address nothing answers at: the refusal must come before any connection attempt.
    code = main(["processor", "--bootstrap", "127.0.0.1:9", "--metrics-port", "off"])
    assert code != 0
    err = capsys.readouterr().err
    assert "LEDGER_PREGRANT_LEASE_MS (30000)" in err and "LEDGER_STALL_AFTER_MS (5000)" in err
    assert "Traceback" not in err

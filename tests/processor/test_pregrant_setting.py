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

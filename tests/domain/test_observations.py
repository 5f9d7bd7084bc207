"""Observations (domain/observations.py): digests of a canonical encoding, the bounds an
intent's observations keep, and which re-run is flagged: the same thread reading another
result for a source, never another thread, never an intent without the observation."""

from __future__ import annotations

import dataclasses
import hashlib

import pytest

from ledger_stream.domain import events as ev
from ledger_stream.domain.observations import (
    MAX_OBSERVATIONS,
    observation_changes,
    observation_problem,
    observe,
)
from ledger_stream.domain.validation import invalid_reason
from tests.factories import KEY, intent


def test_the_digest_is_of_the_canonical_encoding_whatever_the_key_order() -> None:
    a = observe("prices", {"sku": "a-1", "price": 12.50})
    b = observe("prices", {"price": 12.5, "sku": "a-1"})
    raw = b'{"price":12.5,"sku":"a-1"}'
    assert (a.digest, a.size) == (b.digest, b.size) == (hashlib.sha256(raw).hexdigest(), len(raw))
    assert observe("prices", {"sku": "a-1", "price": 12.51}).digest != a.digest


def test_an_observation_holds_no_content() -> None:
    made = observe("model", {"text": "refund invoice inv-9 for 12.50 EUR"}, model="m-1")
    assert "inv-9" not in repr(made) and "12.50" not in repr(made)


def test_a_value_without_a_canonical_form_is_refused() -> None:
    with pytest.raises(TypeError):
        observe("model", {1: "a"})
    with pytest.raises(ValueError):
        observe("model", float("nan"))


def _with(observations: tuple[ev.Observation, ...], thread: str = "t-1",
          origin: ev.Origin = ev.Origin.FRESH) -> ev.Intent:
    return intent(observations=observations, origin=origin,
                  workflow=ev.Workflow("agent", "1.0", thread, "tools", "cp-1"))


def test_a_replay_that_read_another_answer_is_flagged_and_one_that_read_the_same_is_not() -> None:
    first = _with((observe("model", "refund 12.50"), observe("prices", 12.5)))
    same = _with((observe("model", "refund 12.50"), observe("prices", 12.5)),
                 origin=ev.Origin.REPLAY)
    other = _with((observe("model", "refund it: 12.50"), observe("prices", 12.5)),
                  origin=ev.Origin.REPLAY)
    changes = observation_changes([first, same, other])
    assert list(changes) == [other.event_id]
    (change,) = changes[other.event_id]
    assert change.source == "model" and change.first_intent_id == first.event_id
    assert change.digest == observe("model", "refund it: 12.50").digest
    assert change.describe().startswith("observation_changed: model ")


def test_another_thread_or_a_missing_observation_is_not_flagged() -> None:
    first = _with((observe("model", "a"),))
    elsewhere = _with((observe("model", "b"),), thread="t-2")
    without = _with(())
    assert observation_changes([first, elsewhere, without]) == {}
    # ... and each thread is compared with its own first reading
    again = _with((observe("model", "c"),), thread="t-2")
    assert list(observation_changes([first, elsewhere, without, again])) == [again.event_id]


def test_a_size_alone_differing_is_a_change() -> None:
    first = _with((observe("model", "a"),))
    forged = _with((dataclasses.replace(first.observations[0], size=99),))
    assert list(observation_changes([first, forged])) == [forged.event_id]


@pytest.mark.parametrize("bad, reason", [
    (ev.Observation("", "ab" * 32, 1), "no source"),
    (ev.Observation("model", "not-a-digest", 1), "digest"),
    (ev.Observation("model", "AB" * 32, 1), "digest"),
    (ev.Observation("model", "ab" * 32, -1), "negative"),
    (ev.Observation("model", "ab" * 32, 1, model="m" * 300), "exceeds"),
])
def test_an_intent_with_a_malformed_observation_is_poison(bad: ev.Observation,
                                                          reason: str) -> None:
    assert reason in (invalid_reason(intent(observations=(bad,)), KEY) or "")


def test_an_intent_with_too_many_observations_is_poison() -> None:
    many = tuple(observe(f"s{i}", i) for i in range(MAX_OBSERVATIONS + 1))
    assert observation_problem(many[:MAX_OBSERVATIONS]) is None
    assert "more than" in (invalid_reason(intent(observations=many), KEY) or "")
    assert invalid_reason(intent(observations=many[:2]), KEY) is None

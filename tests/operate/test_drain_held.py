"""Which keys keep a workflow version from being drained, from each key's latest changelog
row (operate/drain.py ``judged``; tests/operate/test_drain_kafka.py runs the command on a
real broker): a held key waits for the unfreeze and does not, unless the pre-grant of its
first attempt may still be used by its fencer."""

from __future__ import annotations

from ledger_stream.domain.state import KeyState, Phase
from ledger_stream.operate.drain import judged
from ledger_stream.state.rows import encode_row

NOW, SKEW = 1_000_000, 500


def row(key: str, phase: Phase, version: str = "2.0", **fields: int) -> tuple[str, bytes]:
    return key, encode_row(KeyState(key=key, phase=phase, graph="g", version=version,
                                    attempt=1, **fields))


def test_held_keys_are_listed_apart_and_do_not_keep_the_version_in_flight():
    drain = judged([row("a/x/held", Phase.HELD), row("a/x/done", Phase.SUCCEEDED),
                    row("a/x/other", Phase.DISPATCHED, version="1.0")], "g", "2.0", NOW, SKEW)
    assert (drain.in_flight, [k.key for k in drain.held]) == ((), ["a/x/held"])
    both = judged([row("a/x/held", Phase.HELD), row("a/x/sent", Phase.DISPATCHED)],
                  "g", "2.0", NOW, SKEW)
    assert ([k.key for k in both.in_flight], [k.key for k in both.held]) == (
        ["a/x/sent"], ["a/x/held"])


def test_a_held_key_whose_pre_grant_may_still_be_used_is_in_flight():
    for end in ("pregrant_until_ms", "lease_until_ms"):  # running, or kept as a lease
        still = judged([row("a/x/k", Phase.HELD, **{end: NOW - SKEW})], "g", "2.0", NOW, SKEW)
        assert [k.key for k in still.in_flight] == ["a/x/k"] and still.held == ()
        over = judged([row("a/x/k", Phase.HELD, **{end: NOW - SKEW - 1})], "g", "2.0", NOW,
                      SKEW)
        assert over.in_flight == () and [k.key for k in over.held] == ["a/x/k"]

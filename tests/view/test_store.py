"""The view's store: rows and positions are written together and survive a reopen."""

from __future__ import annotations

from pathlib import Path

from ledger_stream.view.store import ViewStore


def test_rows_and_positions_survive_a_reopen(tmp_path: Path) -> None:
    store = ViewStore(tmp_path / "view")
    store.apply({b"k1": b"one", b"k2": b"two"}, {0: 5, 11: 2})
    store.apply({b"k1": b"three"}, {0: 9})
    store.close()

    again = ViewStore(tmp_path / "view")
    assert again.latest(b"k1") == b"three"
    assert again.latest(b"k2") == b"two"
    assert again.latest(b"nope") is None
    assert again.positions() == {0: 9, 11: 2}
    again.close()


def test_a_key_that_looks_like_a_position_is_still_a_row(tmp_path: Path) -> None:
    store = ViewStore(tmp_path / "view")
    store.apply({b"p\x00\x00\x00\x01": b"row"}, {1: 7})
    assert store.positions() == {1: 7}
    assert store.latest(b"p\x00\x00\x00\x01") == b"row"
    store.close()


def test_reset_forgets_rows_and_positions_and_keeps_the_new_topic_id(tmp_path: Path) -> None:
    store = ViewStore(tmp_path / "view")
    assert store.topic_id() is None
    store.reset("id-1")
    store.apply({b"k1": b"one"}, {0: 5, 3: 1})
    store.reset("id-2")
    assert store.topic_id() == "id-2"
    assert store.latest(b"k1") is None
    assert store.positions() == {}
    store.close()

"""The view's store: rows and positions are written together and survive a reopen."""

from __future__ import annotations

from pathlib import Path

from ledger_stream.view.store import StoredRecord, ViewStore, record_key, record_value


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


def test_a_keys_timeline_is_its_own_records_in_order_and_survives_a_reopen(
        tmp_path: Path) -> None:
    store = ViewStore(tmp_path / "view")
    records = {
        record_key(b"acme/refund/a", 3, 1, 9): record_value(1_000, b"late"),
        record_key(b"acme/refund/a", 0, 1, 2): record_value(900, b"first"),
        record_key(b"acme/refund/a", 5, 0, 1): record_value(1_100, None),  # a tombstone
        # Keys that extend, or are a prefix of, another key's bytes are other keys.
        record_key(b"acme/refund/ab", 0, 1, 3): record_value(950, b"other"),
        record_key(b"acme/refund/", 0, 1, 4): record_value(960, b"shorter"),
    }
    store.apply_history(records, {(0, 1): 5, (3, 1): 10, (5, 0): 2})
    store.apply({b"acme/refund/a": b"receipt"}, {1: 7})
    store.close()

    again = ViewStore(tmp_path / "view")
    assert again.records(b"acme/refund/a") == [
        StoredRecord(0, 1, 2, 900, b"first"), StoredRecord(3, 1, 9, 1_000, b"late"),
        StoredRecord(5, 0, 1, 1_100, None)]
    assert [r.value for r in again.records(b"acme/refund/ab")] == [b"other"]
    assert again.records(b"acme/refund/zz") == []
    assert again.history_positions() == {(0, 1): 5, (3, 1): 10, (5, 0): 2}
    assert again.positions() == {1: 7}  # the receipts' positions are their own

    again.reset_history(["id-a", "id-b"])
    assert again.history_ids() == ["id-a", "id-b"]
    assert again.records(b"acme/refund/a") == [] and again.history_positions() == {}
    assert again.latest(b"acme/refund/a") == b"receipt"  # the latest receipts stay
    again.close()

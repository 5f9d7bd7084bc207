"""A batch reads its records' stored states with one multi-get per partition before it
decides them, and then decides exactly as reading each key on its own would."""

from __future__ import annotations

from pathlib import Path

import pytest

from ledger_stream.domain.decide import decide
from ledger_stream.domain.policy import Policy
from ledger_stream.domain.state import absent
from ledger_stream.kafka.partitioner import partition_for
from ledger_stream.processor.batch import Batch
from ledger_stream.state import RocksDBPartitionStore, StoreBatch, encode_row
from tests.factories import intent
from tests.processor.fakes import ATTEMPTS, INTENTS, PARTITIONS, make_step, record_of

pytestmark = pytest.mark.timeout(30)


class CountingStore(RocksDBPartitionStore):
    def __init__(self, path: Path, partition: int) -> None:
        super().__init__(path, partition)
        self.gets = 0
        self.multi_gets: list[list[str]] = []

    def get(self, key: str) -> bytes | None:
        self.gets += 1
        return super().get(key)

    def get_many(self, keys: list[str]) -> list[bytes | None]:
        self.multi_gets.append(list(keys))
        return super().get_many(keys)


def test_one_multi_get_per_partition_then_no_reads_per_record(tmp_path: Path) -> None:
    stores = {p: CountingStore(tmp_path / f"p{p}", p) for p in range(PARTITIONS)}
    keys = [f"acme/pay/k{i}" for i in range(40)]
    stored = intent(keys[0])
    stores[partition_for(keys[0], PARTITIONS)].write(StoreBatch(
        {keys[0]: encode_row(decide(absent(keys[0]), stored, Policy(), 1).state)}))
    # Five keys twice in the batch (duplicates of an intent): each is read once.
    records = [record_of(intent(key), INTENTS, i, 1_000 + i)
               for i, key in enumerate(keys + keys[:5])]
    batch = Batch(make_step(Policy()), stores, {}, (INTENTS, ATTEMPTS))  # type: ignore[arg-type]
    batch.add_all(records)  # type: ignore[arg-type]
    touched = {partition_for(key, PARTITIONS) for key in keys}
    for p, store in stores.items():
        assert len(store.multi_gets) == (1 if p in touched else 0)
        assert store.gets == 1 if p in touched else store.gets == 0  # the freezes' row only
        assert sorted(k for got in store.multi_gets for k in got) == sorted(
            k for k in keys if partition_for(k, PARTITIONS) == p)
    home = stores[partition_for(keys[0], PARTITIONS)]
    assert home.get_many([keys[0], "missing"]) == [home.get(keys[0]), None]
    assert home.get(keys[0]) is not None
    for store in stores.values():
        store.close()

"""Restore from the deadline basis beside each row equals restore by decoding every row.

The live processor's batch path (``Batch`` over memory stores, fed the fuzz generator's
records: intents, claims, outcomes, ticks, containment, garbage) writes its changelog as
``Checkpoint._produce`` does (rows with ``ledger.due.v1``, the clock, the containment row),
some batches crashing before their commit. Restoring that changelog with the headers must
give the same rows and timer index as restoring it with the headers stripped (every row
decoded), in chunks of any size, interrupted and resumed, under the writer's policy or
another, and over a live store read again from offset 0."""

from __future__ import annotations

import copy
import dataclasses
import random

import pytest

from ledger_lab.fuzz import seeded as fuzz
from ledger_lab.harness.records import FakeMessage
from ledger_stream.domain import events as ev
from ledger_stream.kafka.partitioner import partition_for
from ledger_stream.processor import changelog, restore
from ledger_stream.processor.batch import Batch
from ledger_stream.processor.changelog import ChangelogRecord, Positions
from ledger_stream.processor.step import LedgerStep
from ledger_stream.serde import AvroCodec
from ledger_stream.state import MemoryPartitionStore, TimerEntry

pytestmark = pytest.mark.timeout(120)

GROUP = "g"
Changelogs = dict[int, list[ChangelogRecord]]
OTHER = dataclasses.replace(fuzz.POLICY, stall_after_ms=7_777, clock_skew_ms=13,
                            reconcile_timeout_ms=123_456, replay_window_ms=999_999)


def _timers(store: MemoryPartitionStore) -> list[TimerEntry]:
    return sorted(store.due_timers(2**62))


def _live_run(seed: int, batches: int = 60, per_batch: int = 80
              ) -> tuple[dict[int, MemoryPartitionStore], Changelogs, dict[int, Positions]]:
    rng = random.Random(seed)
    codec = AvroCodec()
    step = LedgerStep(fuzz.POLICY, codec, {fuzz.INTENTS: "intents", fuzz.ATTEMPTS: "attempts"},
                      fuzz.PARTITIONS)
    generator = fuzz.Generator(rng, codec)
    stores = {p: MemoryPartitionStore(p) for p in range(fuzz.PARTITIONS)}
    log: Changelogs = {p: [] for p in range(fuzz.PARTITIONS)}
    committed = {p: Positions() for p in range(fuzz.PARTITIONS)}
    offset, clock = 0, fuzz.BASE_MS
    for _ in range(batches):
        batch = Batch(step, stores, dict(committed), (fuzz.INTENTS, fuzz.ATTEMPTS))
        for _ in range(per_batch):
            topic, key, value, original = generator.record()
            home = partition_for(key, fuzz.PARTITIONS) if key else 0
            if isinstance(original, ev.Tick | ev.Containment) \
                    and 0 <= original.partition < fuzz.PARTITIONS:
                home = original.partition
            offset += 1
            clock += rng.randrange(0, 200_000)
            batch.add(FakeMessage(topic, home, offset, clock, key, value))  # type: ignore[arg-type]
        for p, overlay in batch.overlays.items():  # as Checkpoint._produce writes them
            headers = changelog.headers(GROUP, batch.positions(p))
            dues = overlay.row_dues()
            for key, row in overlay.rows().items():
                due = dues.get(key)
                log[p].append(changelog.parse(len(log[p]), key.encode(), row,
                                              headers if due is None else [*headers, due]))
            if overlay.clock_moved:
                log[p].append(changelog.parse(len(log[p]), changelog.CLOCK_KEY,
                                              changelog.clock_value(overlay.clock), headers))
        if rng.random() < 0.15:
            continue  # crashed after produce, before its commit: restore must skip it
        for p, overlay in batch.overlays.items():
            if overlay.changed:
                stores[p].write(overlay.store_batch(len(log[p])))
            committed[p] = batch.positions(p)
    return stores, log, committed


def _contents(store: MemoryPartitionStore, records: list[ChangelogRecord]
              ) -> tuple[dict[str, bytes | None], int, int]:
    keys = {r.key.decode() for r in records if r.key != changelog.CLOCK_KEY}
    return {k: store.get(k) for k in keys}, store.clock_ms, store.changelog_offset


def _decoding(records: list[ChangelogRecord]) -> list[ChangelogRecord]:
    """The same records without their deadline basis: restore decodes every row."""
    return [dataclasses.replace(r, due=None) for r in records]


@pytest.mark.parametrize("seed", range(6))
def test_restoring_from_the_basis_equals_decoding_every_row(
        seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    stores, log, committed = _live_run(seed)
    rng = random.Random(seed)
    kinds = {r.due[:1] for records in log.values() for r in records if r.due}
    assert {b"s", b"w", b"-"} <= kinds, kinds  # the runs reach several deadline kinds
    for p, records in log.items():
        for policy in (fuzz.POLICY, OTHER):
            for chunk in (1, 3, 5_000):
                monkeypatch.setattr(restore, "CHUNK", chunk)
                decoded = MemoryPartitionStore(p)
                restore.apply_records(decoded, _decoding(records), committed[p], GROUP, policy)
                fast = MemoryPartitionStore(p)
                cut = rng.randrange(len(records) + 1)  # interrupted, then resumed
                restore.apply_records(fast, records[:cut], committed[p], GROUP, policy)
                restore.apply_records(fast, records[cut:], committed[p], GROUP, policy,
                                      end_offset=len(records))
                assert _timers(fast) == _timers(decoded), (p, policy is OTHER, chunk)
                assert _contents(fast, records) == _contents(decoded, records)
                # The "store ahead of its changelog: read it all" path, over the live store.
                again, again_decoded = copy.deepcopy(stores[p]), copy.deepcopy(stores[p])
                restore.apply_records(again, records, committed[p], GROUP, policy, start=0)
                restore.apply_records(again_decoded, _decoding(records), committed[p], GROUP,
                                      policy, start=0)
                assert _timers(again) == _timers(again_decoded)

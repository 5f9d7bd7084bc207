"""A partition's log of freeze and unfreeze commands, shared by the processor's and the
operator's containment tests (a fixtures module: it holds no tests)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from ledger_stream.domain import events as ev
from ledger_stream.domain.containment import (
    command_key,
)
from ledger_stream.domain.policy import Policy
from ledger_stream.processor import changelog
from ledger_stream.processor.batch import Batch
from ledger_stream.processor.changelog import Positions
from ledger_stream.state import MemoryPartitionStore
from tests.processor.fakes import ATTEMPTS, CODEC, INTENTS, FakeMessage, make_step

POLICY = Policy(stall_after_ms=60_000, retry_backoff_ms=0)


GROUP = "g"


P = 1


class Log:
    """One partition's inputs, decided batch by batch on a store that persists between
    batches (the checkpoint's step d), with the changelog rows each batch wrote."""

    def __init__(self, step_ms: int = 10) -> None:
        self.step_ms = step_ms  # partition time between two records
        self.store = MemoryPartitionStore(P)
        self.offset = 0
        self.clock = 1_000
        self.changelog: list[changelog.ChangelogRecord] = []

    def run(self, *events: object) -> list[object]:
        batch = Batch(make_step(POLICY), {P: self.store}, {P: Positions()},  # type: ignore
                      (INTENTS, ATTEMPTS))
        for event in events:
            self.offset += 1
            self.clock += self.step_ms
            batch.add(self._record(event))
        overlay = batch.overlays[P]
        positions = batch.positions(P)
        for key, row in overlay.rows().items():
            self.changelog.append(changelog.ChangelogRecord(
                len(self.changelog), key.encode(), row, GROUP, positions))
        self.store.write(overlay.store_batch(len(self.changelog)))
        return [CODEC.decode(o.value) for o in batch.outputs]

    def _record(self, event: object) -> FakeMessage:
        if isinstance(event, ev.Tick):
            return FakeMessage(ATTEMPTS, P, self.offset, self.clock, b"~tick",
                               CODEC.encode(event))
        if isinstance(event, ev.Containment):  # keyed as a command is sent (one per send)
            return FakeMessage(ATTEMPTS, P, self.offset, self.clock,
                               command_key(event.event_id, uuid.uuid4().hex),
                               CODEC.encode(event))
        if isinstance(event, OldCommand):  # keyed as before 2026-12-05
            return FakeMessage(ATTEMPTS, P, self.offset, self.clock,
                               f"~containment/{event.event.event_id}".encode(),
                               CODEC.encode(event.event))
        topic = INTENTS if isinstance(event, ev.Intent) else ATTEMPTS
        return FakeMessage(topic, P, self.offset, self.clock,
                           event.key.encode(), CODEC.encode(event))  # type: ignore[attr-defined]


@dataclass(frozen=True)
class OldCommand:
    """A freeze or unfreeze record as written before commands applied once (its key has
    no send id)."""

    event: ev.Containment

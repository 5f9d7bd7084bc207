"""What the ledger holds, read for an upgrade check: a key's state (its newest changelog
row, the processor's own record) and the intents a thread's pending step made (from the
intents topic). Read-only: nothing is produced or committed."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Collection
from typing import Protocol

from ledger_stream.config import Settings
from ledger_stream.domain import events as ev
from ledger_stream.domain.state import KeyState
from ledger_stream.kafka.reader import tail_topic
from ledger_stream.kafka.receipts import key_records
from ledger_stream.serde import AvroCodec, DecodeError
from ledger_stream.state.rows import decode_row


class Ledger(Protocol):
    def key_state(self, key: str) -> KeyState:
        """The key's state as the ledger holds it (``Phase.ABSENT`` when it holds none)."""
        ...

    def step_intents(self, checkpoint_ids: Collection[str]) -> dict[str, list[ev.Intent]]:
        """The intents whose workflow checkpoint is one of ``checkpoint_ids``, by id."""
        ...


class KafkaLedger:
    """The ledger's topics. A key's state is its newest changelog row: a row of a batch
    that crashed before its commit is decided again from the same inputs to the same row,
    so it is the state the ledger holds or is about to."""

    def __init__(self, settings: Settings, bootstrap: str, codec: AvroCodec,
                 progress: Callable[[str], None] = lambda _line: None) -> None:
        self._settings, self._bootstrap, self._codec = settings, bootstrap, codec
        self._progress = progress

    def key_state(self, key: str) -> KeyState:
        rows = key_records(self._bootstrap, self._settings.topic("changelog"), key)
        newest = rows[-1].value if rows else None
        return decode_row(newest) if newest else KeyState(key=key)

    def step_intents(self, checkpoint_ids: Collection[str]) -> dict[str, list[ev.Intent]]:
        wanted = set(checkpoint_ids)
        found: dict[str, list[ev.Intent]] = defaultdict(list)
        read = 0
        for _partition, _offset, value in tail_topic(
                self._bootstrap, self._settings.topic("intents"), follow=False):
            read += 1
            if read % 50_000 == 0:
                self._progress(f"read {read} intents")
            if not value:
                continue
            try:
                intent = self._codec.decode(value, expect=(ev.Intent,))
            except DecodeError:
                continue  # poison: the processor sent it to the DLQ
            if intent.workflow.checkpoint_id in wanted:
                found[intent.workflow.checkpoint_id].append(intent)
        self._progress(f"read {read} intents")
        return dict(found)

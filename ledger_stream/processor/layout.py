"""A running processor's watch on the partition layout (kafka/layout.py).

Topics grown under a running processor move keys to partitions that hold none of their
state: deciding them there would dispatch them again (or, with the old count, send them to
the DLQ as misplaced). The client itself learns of new partitions only at its metadata
refresh (five minutes by default), so the watch asks on its own: at every rebalance (before
a record of the new assignment is decided) and every ``CHECK_S`` (one metadata request).
A partition assigned beyond the recorded count tells it too, without asking.

Once the layout changed, the processor stops deciding for good: every partition is paused,
polled records are dropped uncommitted (they stay in Kafka), no Tick is written, the
``ledger_partition_layout_changed`` gauge is 1 (an alert rule fires) and the log names the
migration. The SDK's producers keep working; their intents wait for ``repartition``.
"""

from __future__ import annotations

import logging
import shutil
import time
from pathlib import Path

from confluent_kafka import Consumer, KafkaException
from confluent_kafka.admin import AdminClient

from ledger_stream.kafka.client_config import CLIENT_CONFIG
from ledger_stream.kafka.layout import Layout, layout_problem, migration, topic_counts
from ledger_stream.logs import log_fields
from ledger_stream.processor import metrics

logger = logging.getLogger(__name__)

CHECK_S = 5.0  # between two metadata checks while nothing rebalances
HOLD_POLL_S = 0.2


class LayoutWatch:
    """Says when the topics left the layout the processor started under; then holds."""

    def __init__(self, bootstrap: str, topics: list[str], partitions: int,
                 check_s: float = CHECK_S) -> None:
        self._bootstrap = bootstrap
        self._admin = AdminClient({"bootstrap.servers": bootstrap, **CLIENT_CONFIG})
        self._topics = topics
        self._layout = Layout(partitions)
        self._check_s = check_s
        self._next = time.monotonic() + check_s
        self._epoch = 0
        self.reason: str | None = None  # why deciding stopped (None: it did not)
        metrics.LAYOUT_CHANGED.set(0)

    def changed(self, owned: list[int], epoch: int) -> bool:
        """Whether the layout changed (once True, always True). Cheap between checks."""
        if self.reason is not None:
            return True
        beyond = [p for p in owned if p >= self._layout.partitions]
        if beyond:
            self._stop(f"partitions {beyond} assigned beyond the recorded "
                       f"{self._layout.partitions}: {migration(max(beyond) + 1)}")
            return True
        now = time.monotonic()
        if epoch == self._epoch and now < self._next:
            return False
        self._epoch, self._next = epoch, now + self._check_s
        try:
            counts = topic_counts(self._bootstrap, self._topics, 5.0, self._admin)
        except KafkaException as exc:  # asked again at the next check
            logger.debug("layout check failed", extra=log_fields(error=str(exc)))
            return False
        problem = layout_problem(self._layout, counts)
        if problem:
            self._stop(problem)
        return self.reason is not None

    def hold(self, consumer: Consumer) -> None:
        """One iteration of a processor that stopped deciding: stay in the group (poll
        serves its callbacks), read nothing (every partition paused), drop what comes."""
        try:
            consumer.pause(consumer.assignment())
            consumer.poll(HOLD_POLL_S)
        except KafkaException as exc:
            logger.warning("consumer error while holding", extra=log_fields(error=str(exc)))
            time.sleep(HOLD_POLL_S)

    def _stop(self, reason: str) -> None:
        self.reason = reason
        metrics.LAYOUT_CHANGED.set(1)
        logger.error(f"partition layout changed; this processor stopped deciding: {reason}",
                     extra=log_fields(recorded=self._layout.partitions,
                                      partitioner=self._layout.partitioner))


LAYOUT_FILE = "layout.json"


def adopt_layout(root: Path, layout: Layout) -> None:
    """Make the local stores under ``root`` (a locked state folder) ones built under
    ``layout``: when the folder was built under another (``repartition`` ran since), its
    partition stores are removed, to be restored from the changelog, which holds each key's
    row at its new home. A folder without a record is taken as built under ``layout``
    unless ``layout`` came from a repartition."""
    marker = root / LAYOUT_FILE
    built: Layout | None
    try:
        built = Layout.decode(marker.read_bytes())
    except FileNotFoundError:
        built = None if layout.grown_from else layout
    except ValueError:
        built = None
    if built != layout:
        for store in root.glob("p[0-9]*"):
            shutil.rmtree(store)
        logger.warning("local state built under another partition layout; restoring it "
                       "from the changelog", extra=log_fields(
                           folder=str(root), partitions=layout.partitions))
    marker.write_bytes(layout.encode())

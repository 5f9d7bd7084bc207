"""The processor's loop: consume → decide → produce → commit, one batch at a time.

Each iteration polls for the first record (waiting up to ``POLL_S``), then drains what the
client already fetched without waiting (``consume(max_batch - 1, timeout=0)``), adds a Tick
for each owned partition that was quiet for ``tick_interval_ms``, and runs the checkpoint
(checkpoint.py) on the batch. Rebalance callbacks run only inside those polls, so a batch
never spans a rebalance: records polled across one are dropped and read again (eager: all of
them; incremental: those of the partitions the callback released or took back).

A batch that cannot be committed (a stale generation, a fenced or failed producer, a failed
delivery, an aborted transaction, an unreachable schema registry) is abandoned: the
transaction is aborted, its overlays are discarded, the consumer rewinds to the committed
offsets, one structured line says why (``batch abandoned: ...``), and the loop goes on.
SIGTERM and SIGINT stop the loop between batches: the current batch is committed (or
abandoned), the stores are closed, the consumer leaves the group, and the exit status is 0.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from types import FrameType
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message, TopicPartition

from ledger_stream.config import Settings
from ledger_stream.core import running as core_running
from ledger_stream.domain.policy import Policy
from ledger_stream.kafka.bootstrap import resolve_bootstrap
from ledger_stream.kafka.clients import Consumer
from ledger_stream.kafka.message import error_text, position
from ledger_stream.kafka.offsets import learn_leaders
from ledger_stream.kafka.reach import StopRequested, wait_for_kafka
from ledger_stream.kafka.replicas import below_min_isr
from ledger_stream.logs import log_fields
from ledger_stream.processor import clients, collector, metrics
from ledger_stream.processor.assignment import Assignment
from ledger_stream.processor.batch import Batch, in_time_order, rewind_to
from ledger_stream.processor.checkpoint import Checkpoint
from ledger_stream.processor.exceptions import BatchAbandoned, ProcessorError
from ledger_stream.processor.layout import LayoutWatch, adopt_layout
from ledger_stream.processor.policy import announce, policy_from, under_guarantee
from ledger_stream.processor.preflight import check_topics
from ledger_stream.processor.stages import StageLog
from ledger_stream.processor.step import LedgerStep
from ledger_stream.processor.ticks import Ticker
from ledger_stream.serde import AvroCodec, SerdeError, make_codec
from ledger_stream.serde.exceptions import SchemaRegistryUnavailable
from ledger_stream.state import StateFolder, StoreError

logger = logging.getLogger(__name__)

POLL_S = 0.1
# After SIGTERM (docs/operations.md, "Stopping"): the batch in flight and its abort get
# STOP_CALLS_S, leaving the group and closing the stores until STOP_CLOSE_S; at STOP_BOUND_S
# SIGALRM ends the process whatever still blocks, inside the usual 30 s before a SIGKILL
# (as safe as a crash; a clean stop only spares the group's session timeout).
STOP_CALLS_S, STOP_CLOSE_S, STOP_BOUND_S = 12.0, 20.0, 25
BACKOFF_FIRST_S, BACKOFF_MAX_S = 0.5, 10.0
OUTPUT_ROLES = ("dispatch", "receipts", "alerts", "dlq", "attempts", "changelog", "intents")


class Processor:
    """The single writer per operation key for the partitions the group gives it."""

    _layout: LayoutWatch | None = None  # set by __init__ (tests build one without it)

    def __init__(self, settings: Settings, codec: AvroCodec | None = None,
                 stop: threading.Event | None = None, policy: Policy | None = None) -> None:
        """``stop``: set by a SIGTERM during start-up (the loop then never starts).
        ``policy``: the one ``settings`` give, built by the caller (announced and used)."""
        self.settings = settings
        # First: a missing approval secret is refused at once.
        policy = policy if policy is not None else policy_from(settings)
        codec = codec or make_codec(settings.connection.schema_registry_url)
        policy = under_guarantee(policy, settings.processor.processing_guarantee, codec)
        announce(policy)
        bootstrap = resolve_bootstrap(settings)
        self._stop = stop or threading.Event()
        layout = check_topics(bootstrap, settings, stop=self._stop,  # StopRequested: stopped
                              pregranted=policy.pregrant_lease_ms > 0)
        partitions = layout.partitions
        self._folder = StateFolder(settings.resolved_state_dir, settings.processor.consumer_group)
        self._folder.lock()
        adopt_layout(self._folder.root, layout)  # a store of another layout is rebuilt
        self.instance = settings.processor.instance_id or self._folder.instance_hash()
        group = settings.processor.consumer_group
        self._inputs = (settings.topic("intents"), settings.topic("attempts"))
        metrics.start_series(self._inputs)  # at 0: alert rules then see the first increase
        self._step = LedgerStep(policy, codec,
                                {self._inputs[0]: "intents", self._inputs[1]: "attempts"},
                                partitions, layout.grown_from)
        self._consumer = Consumer(clients.consumer_config(settings, bootstrap))
        self._restorer = Consumer(clients.changelog_reader_config(bootstrap))
        self._ends = Consumer(clients.changelog_ends_config(bootstrap))
        self._assignment = Assignment(self._folder.open, self._restorer, self._step.policy,
                                      self._inputs, settings.topic("changelog"), group, self._ends,
                                      incremental=settings.processor.group_protocol == "consumer")
        self._assignment.home_count = partitions if layout.grown_from else None
        delivery = clients.delivery_for(settings, bootstrap, self.instance, self._consumer,
                                        self._stop)  # StopRequested: stopped
        topics = {role: settings.topic(role) for role in OUTPUT_ROLES}
        self._bootstrap = bootstrap
        self._topic_names = sorted({*topics.values(), *self._inputs})
        self._checkpoint = Checkpoint(delivery, self._consumer, self._step, topics, group,
                                      self.instance, self._assignment.incremental)
        self._ticker = Ticker(settings.processor.tick_interval_ms)
        self._stages = StageLog()
        self._stop_at = float("inf")  # when _stopping ran (an outside stop: at shutdown)
        self._backoff_s = 0.0
        self._fetching_epoch = 0  # the assignment epoch the fetcher was last restarted at
        self._fetching: set[int] = set()  # the partitions owned then
        self._layout = LayoutWatch(bootstrap, [*self._inputs, settings.topic("changelog")],
                                   partitions)

    # -- the loop -------------------------------------------------------------------------

    def run(self) -> None:
        """Run until SIGTERM or SIGINT (or :meth:`stop`)."""
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, self._on_signal)
        a = self._assignment
        for client in (self._restorer, self._ends):  # before the first assignment's restore
            learn_leaders(client, self.settings.topic("changelog"))
        # What start-up built stays; the loop's garbage is collected. Before the subscription:
        # a SIGTERM during the collection then stops a process that joined no group yet.
        collector.tune()
        self._consumer.subscribe(list(self._inputs), on_assign=a.on_assign,
                                 on_revoke=a.on_revoke, on_lost=a.on_lost)
        logger.info("processor started", extra=log_fields(
            group=self.settings.processor.consumer_group, instance=self.instance,
            guarantee=self.settings.processor.processing_guarantee,
            state_dir=str(self._folder.root), core=core_running()))
        try:
            while not self._stop.is_set():
                self._iteration()
        finally:
            self._shutdown()

    def stop(self) -> None:
        self._stopping()

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        if not self._stop.is_set():  # a second signal does not move the bound
            signal.alarm(STOP_BOUND_S)  # the hard bound, kept by the kernel
        self._stopping()

    def _stopping(self) -> None:
        """Stop after the batch in flight, which may wait for Kafka STOP_CALLS_S at most."""
        if not self._stop.is_set():
            self._stop_at = time.monotonic()
            self._checkpoint.delivery.stop_by(self._stop_at + STOP_CALLS_S)
        self._stop.set()

    def _iteration(self) -> None:
        a = self._assignment
        if self._layout and self._layout.changed(a.owned, a.epoch):
            self._layout.hold(self._consumer)  # never decide a key whose partition moved
            return
        self._restart_fetching()
        clock = self._checkpoint.clock
        clock.start()
        records, member, metadata = self._collect()
        ticks = self._ticks()
        if not records and not ticks:
            return
        clock.lap("poll")
        # The wall clock as the batch's outputs are about to leave: deadlines that wait for
        # an answer to them count from it (a partition clock behind it is lag, not silence).
        batch = Batch(self._step, self._assignment.stores, self._assignment.committed,
                      self._inputs, member, metadata, sent_ms=int(time.time() * 1000))
        batch.ticks = ticks
        try:
            batch.add_all(records)
            clock.lap("decide")
            self._checkpoint.run(batch)
        except BatchAbandoned as why:
            self._abandon(why, batch)
            return
        except SchemaRegistryUnavailable as exc:
            self._registry_outage(exc, batch)
            return
        except SerdeError as exc:
            raise ProcessorError(f"cannot encode an output: {exc}") from exc
        except StoreError as exc:
            raise ProcessorError(f"state store failed after a commit: {exc}") from exc
        self._committed(batch)

    def _collect(self) -> tuple[list[Message], str | None, Any]:
        """Records already fetched (waiting only for the first), with the consumer's member
        id and group metadata of the generation that polled them."""
        try:
            first = self._consumer.poll(POLL_S)
            if first is None:
                return [], None, None
            a = self._assignment
            # Callbacks served inside that poll came before its record; from here on, one
            # may come between two records.
            epoch, a.released = a.epoch, set()
            records = [first]
            if self.settings.processor.max_batch > 1:
                records += self._consumer.consume(self.settings.processor.max_batch - 1, timeout=0)
        except KafkaException as exc:
            raise ProcessorError(f"the consumer failed: {exc.args[0].str()}") from exc
        if a.epoch != epoch:
            if self._layout and self._layout.changed(a.owned, a.epoch):
                return [], None, None  # dropped uncommitted: they wait in Kafka
            if not a.incremental:
                # Eager rebalancing revokes everything before assigning anew, so these
                # records belong to a revoked assignment: drop them (new owners read from
                # the committed offsets, as will this process if it gets them back).
                return [], None, None
            records = self._current(records)
        wall_ms = time.time() * 1000
        good = []
        for msg in records:
            error = msg.error()
            if error:
                if error.fatal():  # e.g. brokers without the consumer group protocol
                    raise ProcessorError(f"the consumer failed: {error_text(msg)}")
                logger.warning("consumer error", extra=log_fields(error=error_text(msg)))
                continue
            self._ticker.seen(position(msg)[1], wall_ms)
            good.append(msg)
        member = self._consumer.memberid()
        metadata = self._consumer.consumer_group_metadata() if member else None
        return in_time_order(good), member, metadata

    def _restart_fetching(self) -> None:
        """Incremental rebalancing: once the callbacks of a rebalance ran, read the partitions
        this member kept on from their committed offsets. librdkafka pauses every partition of
        the assignment while the application handles the callbacks and resumes those it keeps,
        but a resume does not wake the fetcher: kept partitions waited up to a second for
        their next fetch (measured with ``python -m ledger_lab.bench.rebalance_pause``). A
        seek does wake it. Partitions new to this member need none: starting their fetch
        wakes it. Must run between batches, before the next poll (the first step of each
        iteration): everything polled was then decided and committed, or abandoned and
        rewound, so the committed offsets are exactly where reading goes on."""
        a = self._assignment
        if not a.incremental or a.epoch == self._fetching_epoch:
            return
        owned = set(a.owned)
        kept = sorted(owned & self._fetching)
        self._fetching_epoch, self._fetching = a.epoch, owned
        if kept:
            # A refused seek (the client stopping that partition) leaves it where it was,
            # which is its committed offset too: nothing to do.
            self._rewind(kept)

    def _current(self, records: list[Message]) -> list[Message]:
        """Incremental rebalancing: the records of ``records`` that belong to an ownership
        still in force. A partition untouched by the callbacks keeps its records, as does
        one first accepted by them (the client read it only after the callback); one
        released loses them; one released and taken back loses them and is read again from
        its committed offsets."""
        a = self._assignment
        again = a.taken_back()
        if again and not self._rewind(again):
            # Nothing of this poll is decided: every owned partition is read again.
            self._rewind()
            self._await_rebalance()
            return []
        # An error (a max-poll-interval notice, a topic error) has no position: it stays, and
        # the caller reports it (a hostile review found the position read raising on one).
        return [m for m in records if m.error() or a.current(position(m)[1], again)]

    def _ticks(self) -> list[int]:
        owned = self._assignment.owned
        wall_ms = time.time() * 1000
        due = self._ticker.due(owned, wall_ms)
        if due:
            for partition in owned:
                clock = self._assignment.stores[partition].clock_ms
                if clock:
                    metrics.CLOCK_LAG.labels(str(partition)).set((wall_ms - clock) / 1000)
        return due

    def _committed(self, batch: Batch) -> None:
        for partition in batch.overlays:
            self._assignment.committed[partition] = batch.positions(partition)
        metrics.BATCHES.inc()
        metrics.BATCH_RECORDS.observe(batch.records)
        metrics.TICKS.inc(len(batch.ticks))
        self._stages.committed(self._checkpoint.clock, batch.records)
        self._backoff_s = 0.0

    # -- abandoning a batch -------------------------------------------------------------------

    def _abandon(self, why: BatchAbandoned, batch: Batch) -> None:
        reason = why.reason
        if why.kind in ("delivery", "aborted"):
            refusing = below_min_isr(self._bootstrap, self._topic_names)
            if refusing:
                reason += ("; the brokers refuse writes to partitions below their "
                           f"min.insync.replicas: {', '.join(refusing[:6])}")
                if len(refusing) > 6:
                    reason += f" and {len(refusing) - 6} more"
        logger.warning(f"batch abandoned: {reason}", extra=log_fields(
            reason=why.kind, records=batch.records, partitions=sorted(batch.overlays)))
        metrics.ABANDONED.labels(why.kind).inc()
        new_producer = why.new_producer
        try:
            self._checkpoint.delivery.abort()
        except BatchAbandoned:
            new_producer = True  # it cannot abort: a new one aborts when it initialises
        if new_producer and self._checkpoint.recover(batch, self._stop):
            self._committed(batch)  # its commit went through after all: read on
            return
        rewound = self._rewind()
        if not rewound or (not self._assignment.incremental and (
                why.await_rebalance or self._consumer.memberid() != batch.member)):
            # Incremental: the member id outlives a fencing and the callbacks come with the
            # next polls anyway; a commit that fails again until they do only costs a retry.
            self._await_rebalance()

    def _registry_outage(self, exc: SchemaRegistryUnavailable, batch: Batch) -> None:
        self._backoff_s = min(BACKOFF_MAX_S, self._backoff_s * 2 or BACKOFF_FIRST_S)
        self._abandon(BatchAbandoned(
            "registry", f"schema registry unavailable, retrying in {self._backoff_s:g} s: "
            f"{exc}"), batch)
        self._stop.wait(self._backoff_s)

    def _rewind(self, partitions: list[int] | None = None) -> bool:
        """Read every owned partition (or ``partitions``) again from its committed offsets.
        False when the client refused a seek (a partition it no longer holds: a rebalance is
        coming).

        A partition whose fetch has not started yet refuses the seek too (librdkafka: "Local:
        Erroneous state"). Nothing of it has been read since it was assigned, at its
        committed offsets (``Assignment.on_assign``), and its fetch will start there: if the
        client does hold it, it counts as rewound. Before, such a refusal, right after a
        rebalance, ended the processor ("cannot rewind a new assignment"; 8 of 300 runs of
        the simulation in tests/processor/test_incremental_simulation.py)."""
        a, done = self._assignment, True
        for partition in a.owned if partitions is None else partitions:
            for tp in rewind_to(a.committed[partition], self._inputs, partition):
                try:
                    self._consumer.seek(tp)
                except KafkaException as exc:
                    if exc.args[0].code() == KafkaError._STATE and self._assigned(tp):
                        continue  # not fetching yet: it starts at its committed offset
                    logger.warning("rewind refused", extra=log_fields(
                        topic=tp.topic, partition=tp.partition, error=exc.args[0].str()))
                    done = False
        return done

    def _assigned(self, tp: TopicPartition) -> bool:
        """Whether the client reads ``tp`` (librdkafka also refuses with "Erroneous state"
        a seek on a partition of a subscribed topic it was never given)."""
        return any(a.topic == tp.topic and a.partition == tp.partition
                   for a in self._consumer.assignment())

    def _await_rebalance(self) -> None:
        """The group moved on without us: read nothing until it has reassigned (or a
        session timeout passed without a rebalance, then go on from the committed
        offsets)."""
        a = self._assignment
        epoch, paused = a.epoch, self._consumer.assignment()
        self._consumer.pause(paused)
        deadline = time.monotonic() + self.settings.processor.session_timeout_ms / 1000
        dropped = False
        while a.epoch == epoch and time.monotonic() < deadline and not self._stop.is_set():
            try:  # serves the rebalance; paused partitions return nothing new
                dropped = self._consumer.poll(POLL_S) is not None or dropped
            except KafkaException as exc:
                raise ProcessorError(f"the consumer failed: {exc.args[0].str()}") from exc
        if a.epoch != epoch:
            if a.incremental:
                # Only what moved was reassigned: what this member kept is still paused,
                # and read again from its committed offsets below.
                kept = {(tp.topic, tp.partition) for tp in self._consumer.assignment()}
                self._consumer.resume([tp for tp in paused
                                       if (tp.topic, tp.partition) in kept])
            # A record of the new assignment may have come back with the rebalance: read
            # it again rather than lose it.
            if (dropped or a.incremental) and not self._rewind():
                raise ProcessorError("cannot rewind a new assignment to its committed "
                                     "offsets; restart the processor")
            return
        self._consumer.resume(paused)
        if not self._rewind():
            # Reading on from anywhere but the committed offsets would skip inputs; a
            # restart reads from them.
            raise ProcessorError("cannot rewind to the committed offsets and no rebalance "
                                 "came; restart the processor")

    # -- stopping ---------------------------------------------------------------------------

    def _shutdown(self) -> None:
        self._stop_at = min(self._stop_at, time.monotonic())  # an outside stop: from now
        self._stages.flush()  # the last window's stage times
        if not self._close_consumer():
            return  # a thread is still in the consumer: nothing more is safe to close
        self._assignment.close()
        self._checkpoint.delivery.close()
        self._restorer.close()
        self._ends.close()
        self._folder.unlock()
        logger.info("processor stopped", extra=log_fields(instance=self.instance))


    def _close_consumer(self) -> bool:
        """Leave the group (the revoke callback closes the stores); False when that did not
        return by STOP_CLOSE_S after the stop (a coordinator not answering): the process
        then ends without it, as after a crash."""
        def close() -> None:
            try:
                self._consumer.close()
            except (KafkaException, RuntimeError) as exc:
                logger.warning("consumer close failed", extra=log_fields(error=str(exc)))
        closing = threading.Thread(target=close, name="consumer-close", daemon=True)
        closing.start()
        closing.join(max(1.0, self._stop_at + STOP_CLOSE_S - time.monotonic()))
        if closing.is_alive():
            logger.error("leaving the consumer group did not finish in time; stopping "
                         "without it (the group reassigns after the session timeout)",
                         extra=log_fields(instance=self.instance, bound_s=STOP_CLOSE_S))
            return False
        return True


def run_processor(settings: Settings, stop: threading.Event | None = None) -> None:
    """Run the processor until SIGTERM or SIGINT (or ``stop`` is set). Raises ProcessorError
    (one line) when it cannot start or cannot go on. Until Kafka answers, it says so and
    keeps asking."""
    stop = stop or threading.Event()
    policy = policy_from(settings)  # a missing approval secret is refused before any connection
    if not wait_for_kafka(resolve_bootstrap(settings), "processor", stop,
                          attempt_s=settings.connection.timeout_s):
        return
    try:
        processor = Processor(settings, stop=stop, policy=policy)
    except StoreError as exc:
        raise ProcessorError(str(exc)) from exc
    except StopRequested:  # SIGTERM while the start-up checks waited for the cluster
        logger.info("processor stopped while waiting for Kafka at start-up")
        return
    processor.run()

"""A whole ledger for one test: processor and connectors as real processes on the real
broker, with the test acting as the agent (intents) and reading receipts by key."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaException

from ledger_lab.harness.processes import Proc, start_processor
from ledger_stream.config import Settings
from ledger_stream.domain import events as ev
from ledger_stream.domain.keys import args_hash, canonical_json
from ledger_stream.kafka.exceptions import KafkaSetupError
from ledger_stream.kafka.producer import EventProducer
from ledger_stream.kafka.receipts import key_receipts

# One machine, one clock: a small skew margin; the lease covers call, report and skew.
FAST = {"LEDGER_CONNECTOR_LEASE_MS": "4000", "LEDGER_CONNECTOR_CALL_TIMEOUT_S": "1.5",
        "LEDGER_CONNECTOR_RECORD_MARGIN_S": "1", "LEDGER_SESSION_TIMEOUT_MS": "6000",
        "LEDGER_CLOCK_SKEW_MS": "500"}


class Stack:
    def __init__(self, settings: Settings, tmp: Path,
                 processor_env: dict[str, str] | None = None,
                 processor_cgroup: Path | None = None) -> None:
        assert settings.kafka_bootstrap
        self.settings = settings
        self.bootstrap = settings.kafka_bootstrap
        self.tmp = tmp
        self.procs: list[Proc] = []
        self._unreadable: Exception | None = None  # the last error reading receipts
        self.processor_env = dict(processor_env or {})
        self.processor_cgroup = processor_cgroup  # every processor joins it (testing/cgroup)
        self.processor = start_processor(settings, tmp / "state", tmp / "processor.log",
                                         env=self.processor_env, cgroup=processor_cgroup)
        self.procs.append(self.processor)
        try:
            self.producer = EventProducer(settings, self.bootstrap)
        except BaseException:
            self.processor.stop(15)  # a half-built stack leaves no process behind
            raise
        self._n = 0

    def restart_processor(self, kill: bool = True) -> Proc:
        """SIGKILL (or stop) the processor, then start a new one on the same state folder,
        consumer group and environment. The new one takes over once the group has
        rebalanced (after the session timeout when the old one was killed)."""
        if kill:
            self.processor.kill()
        else:
            self.processor.stop()
        self._n += 1
        self.processor = start_processor(self.settings, self.tmp / "state",
                                         self.tmp / f"processor-{self._n}.log",
                                         env=self.processor_env, cgroup=self.processor_cgroup)
        self.procs.append(self.processor)
        return self.processor

    def connector(self, kind: str, *args: str, failpoint: str | None = None,
                  env: dict[str, str] | None = None) -> Proc:
        self._n += 1
        extra = {**FAST, **(env or {})}
        if failpoint:
            extra["LEDGER_FAILPOINT"] = failpoint
        proc = Proc(["connector", kind, *args, "--bootstrap", self.bootstrap,
                     "--topic-prefix", self.settings.topic_prefix],
                    self.tmp / f"connector-{self._n}.log", env=extra)
        self.procs.append(proc)
        return proc

    def submit(self, key: str, args: dict[str, Any], target: str,
               payload: dict[str, Any] | None = None) -> ev.Intent:
        intent = self.submit_nowait(key, args, target, payload)
        self.producer.flush()
        return intent

    def submit_nowait(self, key: str, args: dict[str, Any], target: str,
                      payload: dict[str, Any] | None = None) -> ev.Intent:
        """Produce the intent without waiting for its acknowledgement (flush the producer)."""
        intent = ev.Intent(
            event_id=uuid.uuid4().hex, key=key, tenant=key.split("/", 1)[0],
            action=key.split("/")[1], target=target, args_json=canonical_json(args),
            args_hash=args_hash(args), workflow=ev.Workflow("test-agent", "1.0"),
            at_ms=int(time.time() * 1000),
            payload_json=canonical_json(payload) if payload else "",
        )
        self.producer.send("intents", intent)
        return intent

    def receipts(self, key: str) -> list[ev.Receipt]:
        return key_receipts(self.bootstrap, self.settings.topic("receipts"), key)

    def _readable_receipts(self, key: str) -> list[ev.Receipt]:
        """The key's receipts, or none while its partition cannot be read (a leader moving
        after a broker came back: no watermarks for a while); the callers wait on, and name
        the last such error if they give up."""
        try:
            return self.receipts(key)
        except (KafkaException, KafkaSetupError) as exc:
            self._unreadable = exc
            return []

    def await_key(self, key: str, statuses: set[ev.ReceiptStatus],
                  timeout_s: float = 60.0) -> ev.Receipt:
        """The key's latest receipt once its state is one of ``statuses``."""
        deadline = time.monotonic() + timeout_s
        latest: ev.Receipt | None = None
        while time.monotonic() < deadline:
            found = self._readable_receipts(key)
            latest = found[-1] if found else latest
            if latest is not None and latest.key_status in statuses:
                return latest
            time.sleep(0.3)
        logs = "\n".join(f"--- {p.log.name}\n{p.tail(15)}" for p in self.procs)
        raise AssertionError(f"{key} never reached {statuses}; latest {latest}; last read "
                             f"error {self._unreadable!r}\n{logs}")

    def await_answer(self, intent: ev.Intent, timeout_s: float = 60.0) -> ev.Receipt:
        """The receipt that answers ``intent``."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for receipt in self._readable_receipts(intent.key):
                if receipt.intent_event_id == intent.event_id:
                    return receipt
            time.sleep(0.3)
        raise AssertionError(f"no receipt for intent {intent.event_id} (last read error "
                             f"{self._unreadable!r})")

    def close(self) -> None:
        self.producer.close()
        for proc in reversed(self.procs):
            if proc.alive():
                proc.stop(15)


TERMINAL = {ev.ReceiptStatus.SUCCEEDED, ev.ReceiptStatus.FAILED,
            ev.ReceiptStatus.NEEDS_RECONCILIATION}

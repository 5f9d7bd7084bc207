"""``ledger-stream demo``: the ledger deciding on a real Kafka, start to finish.

Starts a local Kafka (unless LEDGER_KAFKA_BOOTSTRAP names one), creates the topics, runs the
processor as its own process, then plays an agent that re-runs a refund step the ways agents
do (first run, resume, replay, fork with a changed amount) and a connector that follows the
claim/grant protocol against a small in-process target that counts its effects. Prints each
receipt and the target's effect count, then stops what it started.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ledger_stream.config import Settings
from ledger_stream.domain import events as ev
from ledger_stream.domain.keys import args_hash, canonical_json, operation_key
from ledger_stream.kafka.local import LocalCluster, ensure_jars, jar_cache
from ledger_stream.kafka.producer import EventProducer
from ledger_stream.kafka.reader import read_topic
from ledger_stream.kafka.topics import create_topics, require_matching

Say = Callable[[str], None]


@contextmanager
def kafka_for(settings: Settings, say: Say) -> Iterator[str]:
    if settings.kafka_bootstrap:
        say(f"using the Kafka cluster at {settings.kafka_bootstrap}")
        yield settings.kafka_bootstrap
        return
    libs = ensure_jars(jar_cache(settings), settings.kafka_version, progress=say)
    with tempfile.TemporaryDirectory(prefix="ledger-demo-") as tmp:
        cluster = LocalCluster(Path(tmp) / "cluster", progress=say)
        try:
            status = cluster.start(libs, settings.kafka_version, nodes=1)
            assert status.bootstrap
            yield status.bootstrap
        finally:
            say("stopping the demo Kafka")
            cluster.stop()


@contextmanager
def processor_process(settings: Settings, bootstrap: str, state_dir: Path,
                      log: Path) -> Iterator[subprocess.Popen[bytes]]:
    with log.open("wb") as fh:
        proc = subprocess.Popen(
            [sys.executable, "-m", "ledger_stream.cli.main", "processor",
             "--bootstrap", bootstrap, "--topic-prefix", settings.topic_prefix,
             "--state-dir", str(state_dir), "--group", f"{settings.topic_prefix}-processor",
             "--metrics-port", "0"],
            stdout=fh, stderr=subprocess.STDOUT,
        )
        try:
            yield proc
        finally:
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)


class ToyTarget:
    """Stands in for a payments API: applies each call, counting effects per key."""

    def __init__(self) -> None:
        self.effects: dict[str, list[str]] = {}

    def apply(self, key: str, attempt_id: str) -> str:
        self.effects.setdefault(key, []).append(attempt_id)
        return f"refund-{len(self.effects)}"


class Demo:
    def __init__(self, settings: Settings, bootstrap: str, say: Say) -> None:
        self.settings = settings
        self.bootstrap = bootstrap
        self.say = say
        self.producer = EventProducer(settings, bootstrap)
        self.target = ToyTarget()
        self.dispatch_seen: set[str] = set()

    def wait(self, role: str, match: Callable[[Any], bool], timeout_s: float = 60.0) -> Any:
        found = read_topic(self.bootstrap, self.settings.topic(role), timeout_s=timeout_s,
                           until=lambda records: any(map(match, records)))
        hits = [r for r in found if match(r)]
        if not hits:
            raise RuntimeError(f"no matching {role} event within {timeout_s} s")
        return hits[-1]

    def submit(self, label: str, key: str, args: dict[str, Any]) -> ev.Receipt:
        intent = ev.Intent(
            event_id=uuid.uuid4().hex, key=key, tenant="acme", action="refund",
            target="toy-payments", args_json=canonical_json(args), args_hash=args_hash(args),
            workflow=ev.Workflow("refund-agent", "1.0", "thread-42", "issue_refund"),
            at_ms=int(time.time() * 1000),
        )
        self.producer.send("intents", intent)
        self.producer.flush()
        receipt: ev.Receipt = self.wait(
            "receipts", lambda r: r.intent_event_id == intent.event_id)
        self.say(f"  {label:<34} -> receipt {receipt.status.value:<9} "
                 f"reason={receipt.reason.value:<9} external_id={receipt.external_id or '-'}")
        return receipt

    def connector_round(self, key: str) -> None:
        """One pass of a protocol-following connector: claim, wait for the grant, apply."""
        dispatch = self.wait("dispatch", lambda d: isinstance(d, ev.Dispatch) and d.key == key
                             and d.dispatch_id not in self.dispatch_seen)
        self.dispatch_seen.add(dispatch.dispatch_id)
        claim_id = uuid.uuid4().hex
        now = int(time.time() * 1000)
        self.producer.send("attempts", ev.AttemptClaim(
            uuid.uuid4().hex, key, dispatch.attempt, claim_id, "demo-connector", 30_000, now))
        self.producer.flush()
        answer = self.wait("dispatch", lambda d: getattr(d, "claim_id", None) == claim_id)
        if not isinstance(answer, ev.Grant):
            self.say(f"  connector: {type(answer).__name__} for attempt {dispatch.attempt}")
            return
        external_id = self.target.apply(key, claim_id)
        self.producer.send("attempts", ev.AttemptOutcome(
            uuid.uuid4().hex, key, dispatch.attempt, claim_id, ev.OutcomeStatus.SUCCEEDED,
            int(time.time() * 1000), external_id))
        self.producer.flush()
        self.say(f"  connector: granted attempt {dispatch.attempt}, target applied "
                 f"{external_id}")
        self.wait("receipts", lambda r: r.key == key and r.status is ev.ReceiptStatus.SUCCEEDED)

    def play(self) -> bool:
        key = operation_key("acme", "refund", "invoice-881")
        args = {"invoice": "invoice-881", "amount": 125.00, "currency": "EUR"}
        self.say(f"agent step issue_refund, operation key {key}")
        self.submit("first run", key, args)
        self.connector_round(key)
        self.submit("resume after a crash (same args)", key, args)
        self.submit("time-travel replay (same args)", key, args)
        self.submit("fork with amount 250 (conflict)", key, {**args, "amount": 250})
        alerts = read_topic(self.bootstrap, self.settings.topic("alerts"))
        effects = len(self.target.effects.get(key, []))
        self.say(f"target effects for {key}: {effects}")
        self.say(f"alerts: {', '.join(a.kind.value for a in alerts) or 'none'}")
        return effects == 1


def run_demo(settings: Settings, say: Say = print) -> int:
    settings = settings.model_copy(update={"topic_prefix": f"demo-{uuid.uuid4().hex[:6]}",
                                           "partitions": 3})
    with kafka_for(settings, say) as bootstrap, \
            tempfile.TemporaryDirectory(prefix="ledger-demo-state-") as state:
        settings = settings.model_copy(update={"kafka_bootstrap": bootstrap})
        require_matching(create_topics(bootstrap, settings))
        say(f"topics {settings.topic_prefix}.* created; starting the processor")
        log = Path(state) / "processor.log"
        with processor_process(settings, bootstrap, Path(state) / "rocksdb", log) as proc:
            ok = Demo(settings, bootstrap, say).play()
            if proc.poll() is not None:
                say(log.read_text(errors="replace")[-2000:])
                return 1
        say("demo " + ("passed: one effect, duplicates answered, conflict rejected"
                       if ok else "FAILED"))
        return 0 if ok else 1

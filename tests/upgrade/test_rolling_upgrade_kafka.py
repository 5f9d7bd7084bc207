"""A rolling upgrade of the ledger under load, on the real broker: nothing duplicated or lost.

Two processors (one consumer group) and two connectors (one group) of the previous release
run while an SDK client submits intents, about six a second from before the roll begins
until after it ends (a few hundred). The release is played by this code
with the released schemas (``LEDGER_SCHEMA_DIR`` = ``schemas/released/<last>``); the new
version by this code with schemas that add a field with a default to every event. As the
operations guide says, single-object frames make it two passes, one instance at a time
(SIGTERM the old one, start its successor):

1. new version, writing the release's schemas (``LEDGER_WRITE_SCHEMAS``): it reads both,
   and the release instances still running read all it writes;
2. new version, writing its own schemas: every instance left reads them.

At the end: every intent has a final receipt (none lost), the target saw one request per
key (counted at the target), the DLQ is empty, and the receipts topic holds events of the
release's and of the new schemas (both were on the wire and read).
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from ledger_lab.harness.processes import Proc, start_processor
from ledger_lab.harness.sandbox import SandboxProc
from ledger_lab.harness.stack import FAST
from ledger_stream.config import Settings
from ledger_stream.domain import events as ev
from ledger_stream.sdk.client import LedgerClient
from ledger_stream.serde import AvroCodec, SchemaSet
from ledger_stream.serde.schemas import RELEASED, SCHEMA_DIR
from tests.processor.support import log_lines, read_raw, wait_for

ADDED = {"name": "rollout_note", "type": "string", "default": "",
         "doc": "Added by the upgrade under test; read by both versions."}
MAX_INTENTS = 800  # the load runs from before the roll to after it (a bound, not a goal)
SUBMIT_EVERY_S = 0.15  # about 6 intents a second
RESUBMITTED = 40  # keys sent again once the roll is over: answered, not paid again


def _release() -> Path:
    return max((SCHEMA_DIR / RELEASED).iterdir(),
               key=lambda p: tuple(int(x) for x in p.name.split(".")))


def _new_schema_dir(tmp: Path) -> Path:
    """The current schemas with ``ADDED`` on every event, the released ones alongside."""
    folder = tmp / "schemas-new"
    folder.mkdir()
    for path in SCHEMA_DIR.glob("*.avsc"):
        raw = json.loads(path.read_text())
        raw["fields"].append(ADDED)
        (folder / path.name).write_text(json.dumps(raw))
    for path in (SCHEMA_DIR / RELEASED).glob("*/*.avsc"):
        target = folder / RELEASED / path.parent.name
        target.mkdir(parents=True, exist_ok=True)
        (target / path.name).write_text(path.read_text())
    return folder


class Group:
    """The ledger's processes, each replaced in place by a successor of another version."""

    def __init__(self, settings: Settings, tmp: Path, sandbox_url: str) -> None:
        self.settings, self.tmp, self.sandbox_url = settings, tmp, sandbox_url
        self.procs: dict[str, Proc] = {}
        self.all: list[Proc] = []
        self._n = 0

    def start(self, slot: str, env: dict[str, str]) -> None:
        self._n += 1
        log = self.tmp / f"{slot}-{self._n}.log"
        if slot.startswith("processor"):
            proc = start_processor(self.settings, self.tmp / f"state-{slot}", log, env=env)
        else:
            assert self.settings.kafka_bootstrap
            proc = Proc(["connector", "http", "--name", "payments", "--base-url",
                         self.sandbox_url, "--bootstrap", self.settings.kafka_bootstrap,
                         "--topic-prefix", self.settings.topic_prefix], log,
                        env={**FAST, **env})
        self.procs[slot] = proc
        self.all.append(proc)
        # A rolling upgrade moves on once the successor runs (consumer created, signal
        # handlers in place), as an orchestrator's readiness check would.
        kind = slot.split("-")[0]
        wait_for(f"{slot} started", lambda: bool(log_lines(proc, f"{kind} started")),
                 60, [proc])

    def replace(self, slot: str, env: dict[str, str]) -> None:
        """SIGTERM the slot's instance, wait for it to end, start its successor."""
        code = self.procs[slot].stop(30)
        assert code == 0, f"{slot} exited {code} on SIGTERM:\n{self.procs[slot].tail()}"
        self.start(slot, env)

    def close(self) -> None:
        for proc in reversed(self.all):
            if proc.alive():
                proc.stop(15)

    def logs(self) -> str:
        return "\n".join(f"--- {p.log.name}\n{p.tail(12)}" for p in self.all)


class Load:
    """An SDK client submitting a fresh key every ``SUBMIT_EVERY_S`` until stopped; each
    submit waits for the key's final receipt in a pool thread."""

    def __init__(self, client: LedgerClient) -> None:
        self.client = client
        self.pool = ThreadPoolExecutor(32)
        self.answers: dict[str, Future[ev.Receipt]] = {}
        self.run = uuid.uuid4().hex[:6]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._submit_all)

    def submit(self, key: str) -> Future[ev.Receipt]:
        intent = self.client.intent(key, "refund", "payments", {"amount": 5},
                                    workflow=ev.Workflow("rolling-upgrade", "1.0"))
        return self.pool.submit(self.client.submit, intent, 120.0, raise_errors=False)

    def _submit_all(self) -> None:
        for i in range(MAX_INTENTS):
            if self._stop.is_set():
                return
            key = f"acme/refund/{self.run}-{i}"
            self.answers[key] = self.submit(key)
            time.sleep(SUBMIT_EVERY_S)

    def start(self) -> None:
        self._thread.start()

    def running(self) -> bool:
        return self._thread.is_alive()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.ident is not None:
            self._thread.join()

    def close(self) -> None:
        self.stop()
        self.pool.shutdown(wait=False, cancel_futures=True)
        self.client.close()


def test_a_rolling_upgrade_under_load_duplicates_and_loses_nothing(
        ledger_topics: Settings, sandbox: SandboxProc, tmp_path: Path) -> None:
    release, new_dir = _release(), _new_schema_dir(tmp_path)
    old_env = {"LEDGER_SCHEMA_DIR": str(release)}
    bridge_env = {"LEDGER_SCHEMA_DIR": str(new_dir), "LEDGER_WRITE_SCHEMAS": release.name}
    new_env = {"LEDGER_SCHEMA_DIR": str(new_dir)}
    slots = ["processor-a", "processor-b", "connector-a", "connector-b"]
    group = Group(ledger_topics, tmp_path, sandbox.url)
    # The agents' SDK is upgraded like the ledger; it writes the release's schemas.
    load = Load(LedgerClient(ledger_topics, codec=AvroCodec(
        SchemaSet.load(new_dir, write_release=release.name))))
    bootstrap = ledger_topics.kafka_bootstrap or ""
    try:
        for slot in slots:
            group.start(slot, old_env)
        started = time.monotonic()
        load.start()
        time.sleep(4)  # the release alone under load first
        for env in (bridge_env, new_env):  # the two passes, one instance at a time
            for slot in slots:
                group.replace(slot, env)
                time.sleep(2)
        rolled_s = time.monotonic() - started
        assert load.running(), f"the load ended before the roll did ({rolled_s:.0f} s)"
        time.sleep(2)  # the new version alone under load last
        load.stop()
        receipts = {key: future.result(150) for key, future in load.answers.items()}
        again = {key: load.submit(key) for key in list(receipts)[:RESUBMITTED]}
        repeated = {key: future.result(60) for key, future in again.items()}
        dlq = read_raw(bootstrap, ledger_topics.topic("dlq"))
        frames = {r.value[2:10] for r in read_raw(bootstrap, ledger_topics.topic("receipts"))
                  if r.value is not None}
    finally:
        load.close()
        group.close()

    not_final = {k: r.key_status for k, r in receipts.items()
                 if r.key_status is not ev.ReceiptStatus.SUCCEEDED}
    assert not not_final, f"intents without a final receipt: {not_final}\n{group.logs()}"
    assert dlq == [], f"dead letters: {[r.value for r in dlq][:3]}\n{group.logs()}"
    _assert_one_effect_each(sandbox.ledger(), receipts, repeated)
    # Both versions' events went over the wire: the release's Receipt and the new one.
    released = SchemaSet.load(release).current("Receipt").fingerprint
    added = SchemaSet.load(new_dir).current("Receipt").fingerprint
    assert {released, added} <= frames, (released.hex(), added.hex(), [f.hex() for f in frames])


def _assert_one_effect_each(ledger: dict[str, Any], receipts: dict[str, ev.Receipt],
                            repeated: dict[str, ev.Receipt]) -> None:
    """Counted at the target: one request (so one effect, deduplicating or not) per key;
    a key submitted again is answered with its original payment."""
    per_key: dict[str, int] = {}
    for request in ledger["requests"]:
        if request["idempotency_key"] in receipts:
            per_key[request["idempotency_key"]] = per_key.get(request["idempotency_key"], 0) + 1
    assert set(per_key) == set(receipts), "a key never reached the target"
    assert {k: n for k, n in per_key.items() if n != 1} == {}, "a key reached the target twice"
    effects = [e for e in ledger["effects"] if e["idempotency_key"] in receipts]
    assert len(effects) == len(receipts) >= 150
    for key, receipt in repeated.items():
        assert (receipt.key_status, receipt.external_id) == \
            (ev.ReceiptStatus.SUCCEEDED, receipts[key].external_id)

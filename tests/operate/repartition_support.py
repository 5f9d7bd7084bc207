"""Helpers the repartition tests share (a fixtures module: it holds no tests)."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

from ledger_lab.harness.processes import Proc
from ledger_stream.config import Settings
from ledger_stream.domain import events as ev
from tests.processor.support import read_raw


def deciding_intents(settings: Settings) -> Counter[str]:
    """How many intents each key's dispatches were decided for: 1 unless a repeated intent
    was taken for a new key. (A grant that reached the connector too late to call leads
    to a next attempt of the same intent, uncalled: so the dispatches alone can be more.)"""
    found = read_raw(settings.kafka_bootstrap or "", settings.topic("dispatch"))
    ids = {(e.key, e.intent_event_id) for r in found
           if isinstance(e := r.event(), ev.Dispatch)}
    return Counter(key for key, _ in ids)


def run_repartition(settings: Settings, tmp: Path, to: int) -> Proc:
    proc = Proc(["repartition", "--to", str(to), "--bootstrap", settings.kafka_bootstrap or "",
                 "--topic-prefix", settings.topic_prefix, "--group",
                 settings.consumer_group], tmp / f"repartition-{time.monotonic_ns()}.log")
    proc.popen.wait(120)
    return proc

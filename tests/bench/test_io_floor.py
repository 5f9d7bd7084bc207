"""The io-floor arm makes, per intent, the outputs the processor would: the same event types
to the same topics, a changelog row exactly when the key's state changes. Ground truth is the
real ``decide`` run over the same workload. No Kafka: records are FakeMessages, produce a list."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ledger_lab.bench.arms.raw_echo import _Floor, floor_topics
from ledger_lab.bench.workload import WorkloadSpec, iter_intents
from ledger_lab.harness.records import FakeMessage
from ledger_stream.domain.decide import decide
from ledger_stream.domain.policy import Policy
from ledger_stream.domain.state import KeyState, absent
from ledger_stream.kafka.partitioner import partition_for
from ledger_stream.serde import AvroCodec

PARTITIONS = 12
TOPIC_OF = dict(zip(("Dispatch", "Receipt", "Alert", "changelog"), floor_topics("out"),
                    strict=True))


def test_the_floor_makes_the_outputs_decide_makes(tmp_path: Path) -> None:
    codec = AvroCodec()
    floor = _Floor("out", tmp_path, PARTITIONS)
    states: dict[str, KeyState] = {}
    policy = Policy()
    kinds = set()
    sent: list[tuple[str, dict[str, Any]]] = []

    def produce(topic: str, **record: Any) -> None:
        sent.append((topic, record))

    for offset, (kind, intent) in enumerate(iter_intents(WorkloadSpec(600, seed=3))):
        kinds.add(kind)
        sent.clear()
        key = intent.key.encode()
        record = FakeMessage("in", partition_for(key, PARTITIONS), offset, intent.at_ms, key,
                             codec.encode(intent))
        floor.handle(record, produce)  # type: ignore[arg-type]
        before = states.get(intent.key, absent(intent.key))
        decision = decide(before, intent, policy, intent.at_ms)
        states[intent.key] = decision.state
        expected = sorted(TOPIC_OF[type(o).__name__] for o in decision.outputs)
        if decision.state is not before:
            expected = sorted([*expected, TOPIC_OF["changelog"]])
        assert sorted(topic for topic, _ in sent) == expected, (kind, intent.key)
        for topic, produced in sent:
            if topic != TOPIC_OF["changelog"]:
                name = codec.decode_record(produced["value"])[0]
                assert TOPIC_OF[name] == topic
        if offset % 50 == 49:
            floor.committed()  # later repeats read their key's row from the store
    assert kinds == {"f", "d", "c"}

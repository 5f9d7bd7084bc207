"""The fuzzer of the processor's input path (ledger_lab/fuzz/seeded.py): a short run
holds every promise, and the fuzzer finds the bugs planted to check it can."""

from __future__ import annotations

import functools
import json
from dataclasses import replace

import pytest

from ledger_lab.fuzz import seeded as fuzz
from ledger_stream.cli.main import main
from ledger_stream.processor.step import LedgerStep
from ledger_stream.serde import AvroCodec

pytestmark = pytest.mark.timeout(120)


def test_ten_thousand_hostile_records_end_in_typed_results() -> None:
    report = fuzz.run_fuzz(10_000, seed=7)  # `ledger-stream fuzz` runs a million
    assert report.violation_count == 0, report.violations
    assert report.cases == 10_000
    assert {"decoded", "decode_error", "poison", "decided"} <= set(report.kinds)
    assert report.kinds["decided"] > 1_000 and report.kinds["poison"] > 1_000


def _step(policy=fuzz.POLICY) -> LedgerStep:
    return LedgerStep(policy, AvroCodec(), {fuzz.INTENTS: "intents",
                                            fuzz.ATTEMPTS: "attempts"}, fuzz.PARTITIONS)


def test_a_step_that_forgets_an_approval_rule_is_caught() -> None:
    lax = _step(replace(fuzz.POLICY, approval_required_actions=frozenset()))
    report = fuzz.run_fuzz(3_000, seed=3, step=lax)
    assert report.violation_count > 0
    assert "although it has no valid approval" in report.violations[0]
    assert report.violations[0].startswith("seed 3 case ")


def test_a_forged_signature_accepted_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    from ledger_stream.domain import approval

    class Lenient:  # the ledger's check, broken: every signature verifies
        def __init__(self, raw: bytes) -> None:
            pass

        @classmethod
        def from_public_bytes(cls, raw: bytes) -> Lenient:
            return cls(raw)

        def verify(self, signature: bytes, text: bytes) -> None:
            return None

    monkeypatch.setattr(approval, "Ed25519PublicKey", Lenient)
    report = fuzz.run_fuzz(5_000, seed=4)
    assert report.violation_count > 0
    assert "no valid approval" in report.violations[0]


def test_a_poison_record_that_changes_a_key_is_caught() -> None:
    step = _step()
    decide = step.decide

    def leaky(view, event, now_ms):  # decides the poison record's key as if it were valid
        if event.__class__.__name__ == "PoisonInput" and event.key and event.value:
            try:
                decoded = AvroCodec().decode(event.value)
                if hasattr(decoded, "args_hash") and decoded.key.count("/") >= 2:
                    return decide(view, decoded, now_ms)
            except Exception:  # noqa: BLE001
                pass
        return decide(view, event, now_ms)

    step.decide = leaky  # type: ignore[method-assign]
    report = fuzz.run_fuzz(5_000, seed=6, step=step)
    assert report.violation_count > 0


def test_a_reader_that_raises_is_caught() -> None:
    step = _step()
    read = step.read

    def fragile(value, *args):  # a decoder bug: chokes on a truncated frame
        if value is not None and 0 < len(value) < 10:
            raise IndexError("frame too short")
        return read(value, *args)

    step.read = fragile  # type: ignore[method-assign]
    report = fuzz.run_fuzz(3_000, seed=5, step=step)
    assert report.violation_count > 0 and "IndexError" in report.violations[0]


def test_the_command_prints_json_and_exits_1_on_a_violation(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    assert main(["fuzz", "--cases", "1000", "--seed", "2", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["violations"] == 0
    lax = _step(replace(fuzz.POLICY, approval_required_actions=frozenset()))
    monkeypatch.setattr(fuzz, "run_fuzz", functools.partial(fuzz.run_fuzz, step=lax))
    assert main(["fuzz", "--cases", "3000", "--seed", "3"]) == 1
    assert "seed 3 case " in capsys.readouterr().out
    assert main(["fuzz", "--cases", "0"]) == 2


def test_only_the_seal_a_passed_deadline_makes_is_excused() -> None:
    """Found by a hostile review: the judge excused any change to a key that ended sealed;
    now only ``after == seal(before)`` at a clock past the replay window passes."""
    from ledger_stream.domain.state import KeyState, Phase
    from ledger_stream.processor.partition import PartitionOverlay
    from ledger_stream.state import MemoryPartitionStore, StoreBatch
    from ledger_stream.state.rows import encode_row

    paid = KeyState(key="acme/refund/k1", phase=Phase.SUCCEEDED, args_hash="h",
                    external_id="pay-1", attempt=1, terminal_at_ms=1_000)
    store = MemoryPartitionStore(0)
    store.write(StoreBatch({paid.key: encode_row(paid)}, set(), set(), None, None))
    overlay = PartitionOverlay(store, fuzz.POLICY)
    past = 1_000 + fuzz.POLICY.replay_window_ms + 1
    excused = functools.partial(fuzz._sealed_by_its_deadline, overlay, {}, paid.key)
    assert excused(paid.sealed(), past)
    assert not excused(replace(paid.sealed(), external_id="pay-EVIL"), past)
    assert not excused(paid.sealed(), past - 1)  # the window has not passed
    assert not excused(replace(paid, external_id="pay-EVIL"), past)
    assert fuzz._sealed_by_its_deadline(overlay, {paid.key: paid}, paid.key, paid.sealed(),
                                        past)

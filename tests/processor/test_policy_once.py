"""The processor builds its decision policy once at start: the policy it announces (start
log, ``ledger_decision_policy_info``) is the very object its decisions use, and the
approval keys are read, and their warnings logged, once."""

from __future__ import annotations

from pathlib import Path

import pytest

from ledger_stream.config import Settings
from ledger_stream.domain.policy import Policy
from ledger_stream.processor import runtime

pytestmark = pytest.mark.kafka


def test_the_policy_is_built_once_and_the_announced_one_decides(
        ledger_topics: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[Policy] = []
    announced: list[Policy] = []
    deciding: list[Policy] = []
    build, announce = runtime.policy_from, runtime.announce

    def counted(settings: Settings) -> Policy:
        built.append(build(settings))
        return built[-1]

    def heard(policy: Policy) -> None:
        announced.append(policy)
        announce(policy)

    def started(processor: runtime.Processor) -> None:  # the loop itself is not needed
        deciding.append(processor._step.policy)

    monkeypatch.setattr(runtime, "policy_from", counted)
    monkeypatch.setattr(runtime, "announce", heard)
    monkeypatch.setattr(runtime.Processor, "run", started)
    runtime.run_processor(ledger_topics.model_copy(update={"state_dir": tmp_path / "state"}))
    assert len(built) == 1, built
    assert len(announced) == 1 and announced[0] is built[0]
    assert len(deciding) == 1 and deciding[0] is built[0]

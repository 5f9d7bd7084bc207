"""Per-action policy from settings: the file's ``[actions.ACTION]`` tables, the environment
and the processor's ``--action-policy`` flags (a flag beats the file, knob by knob); a rule
the ledger cannot honour stops the processor at start with a message naming the action and
the knob; a changed knob changes the policy's revision; restore seals as the live path."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from prometheus_client import REGISTRY
from pydantic import ValidationError

from ledger_stream.cli.main import main
from ledger_stream.config import Settings, load_settings
from ledger_stream.domain import decide, due_ms
from ledger_stream.domain.deadlines import deadline_basis
from ledger_stream.domain.events import OutcomeStatus
from ledger_stream.domain.policy import ActionRules, LookupRetry
from ledger_stream.domain.state import absent
from ledger_stream.processor.changelog import ChangelogRecord, Positions, due_header
from ledger_stream.processor.policy import ConfigError, announce, describe, policy_from
from ledger_stream.processor.restore import apply_records
from ledger_stream.settings.policy import ActionPolicySettings
from ledger_stream.state import MemoryPartitionStore, encode_row
from tests.factories import claim, intent, outcome

pytestmark = pytest.mark.timeout(30)

FILE = """\
max_attempts = 4
[actions.refund]
max_attempts = 6
retry_after_lookup = "deduplicating"
reversible = true
[actions.send_email]
max_attempts = 1
retry_after_lookup = "never"
approval = true
"""


@pytest.fixture(autouse=True)
def _dev(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("LEDGER_CONFIG", "LEDGER_ACTIONS", "LEDGER_REPLAY_WINDOW_MS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LEDGER_DEV_MODE", "1")  # approver keys are another test's concern


def _file(tmp_path: Path, text: str = FILE) -> str:
    path = tmp_path / "ledger.toml"
    path.write_text(text)
    return str(path)


def test_the_file_sets_each_actions_rules_and_the_rest_keeps_the_ledgers(tmp_path: Path):
    policy = policy_from(load_settings(config_file=_file(tmp_path)))
    assert policy.rules("refund") == ActionRules(max_attempts=6, reversible=True)
    assert policy.rules("send_email") == ActionRules(
        max_attempts=1, retry_after_lookup=LookupRetry.NEVER, approval=True)
    assert (policy.max_attempts_for("refund"), policy.max_attempts_for("send_email"),
            policy.max_attempts_for("db_write")) == (6, 1, 4)
    assert policy.requires_approval("send_email") and not policy.requires_approval("refund")
    assert "send_email: max_attempts 1" in describe(policy)


def test_a_flag_sets_one_knob_over_the_files_table(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    from ledger_stream.cli import processor_cmd

    built: list[Settings] = []

    def stop_at_start(settings: Settings, stop: object) -> None:
        built.append(settings)

    monkeypatch.setattr("ledger_stream.processor.run_processor", stop_at_start)
    assert main(["processor", "--config", _file(tmp_path), "--metrics-port", "off",
                 "--action-policy", "refund.max_attempts=2",
                 "--action-policy", "db_write.approval=true"]) == 0
    policy = policy_from(built[0])
    assert policy.rules("refund") == ActionRules(max_attempts=2, reversible=True)
    assert policy.requires_approval("db_write")
    assert processor_cmd.action_policy_flags(["a.b.reversible=TRUE"]) == {
        "a.b": {"reversible": True}}


def test_the_environment_sets_rules_as_json(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("LEDGER_ACTIONS", '{"db_write": {"max_attempts": 2}}')
    assert policy_from(Settings()).max_attempts_for("db_write") == 2


@pytest.mark.parametrize(("flag", "named"), [
    ("send_email.max_attempts=0", "actions.send_email.max_attempts"),
    ("send_email.retry_after_lookup=sometimes", "actions.send_email.retry_after_lookup"),
    ("send_email.retry_after_lookup=always", "needs reversible = true"),
    ("send_email.attempts=1", "actions.send_email.attempts"),
    ("send_email.replay_window_ms=-5", "actions.send_email.replay_window_ms"),
    ("send_email=1", "expected ACTION.KNOB=VALUE"),
])
def test_an_invalid_rule_stops_the_processor_at_start_naming_it(
        flag: str, named: str, capsys: pytest.CaptureFixture[str]):
    assert main(["processor", "--metrics-port", "off", "--action-policy", flag]) == 2
    assert named in capsys.readouterr().err


@pytest.mark.parametrize(("rules", "named"), [
    ({"refund": {"replay_window_ms": 8 * 24 * 3600 * 1000}},
     "actions.refund.replay_window_ms = 691200000 is longer than LEDGER_REPLAY_WINDOW_MS"),
    ({"refund": {"approval": False}}, "actions.refund.approval = false, but"),
])
def test_a_rule_the_ledger_cannot_honour_is_refused(rules: dict, named: str):
    settings = Settings(actions=rules, approval_required_actions=("refund",))
    with pytest.raises(ConfigError, match=re.escape(named)):
        policy_from(settings)


def test_a_rule_under_a_name_no_key_carries_is_refused():
    """At load (the SDK and the gateway read the same settings), and by the processor for
    settings built without validation (``model_copy``)."""
    rule = "an action type is one operation-key segment"
    with pytest.raises(ValidationError, match=re.escape(rule)):
        Settings(actions={"a/b": {"max_attempts": 1}})
    unchecked = Settings().model_copy(
        update={"actions": {"a/b": ActionPolicySettings(max_attempts=1)}})
    with pytest.raises(ConfigError, match=re.escape(f"actions.a/b: {rule}")):
        policy_from(unchecked)


def test_a_changed_knob_changes_the_revision_and_the_same_knobs_keep_it():
    def revision(**rules: object) -> str:
        return policy_from(Settings(actions={"refund": rules} if rules else {})).revision

    base = revision()
    assert base.startswith("p-") and base == revision()
    changed = {revision(max_attempts=1), revision(retry_after_lookup="never"),
               revision(approval=True), revision(reversible=True),
               revision(replay_window_ms=1_000)}
    assert base not in changed and len(changed) == 5
    assert policy_from(Settings(max_attempts=3)).revision != base


def test_the_processor_announces_its_revision_in_its_log_and_metrics(
        caplog: pytest.LogCaptureFixture):
    policy = policy_from(Settings(actions={"send_email": {"max_attempts": 1}}))
    caplog.set_level("INFO")
    announce(policy)
    assert f"decision policy {policy.revision}" in caplog.text
    assert "send_email: max_attempts 1" in caplog.text
    assert REGISTRY.get_sample_value("ledger_decision_policy_info",
                                     {"revision": policy.revision}) == 1


def test_restore_indexes_a_terminal_key_at_its_actions_own_seal():
    """The changelog's seal basis counts the ledger-wide window; a key of an action with a
    shorter one is indexed at its own, exactly where the live path put it."""
    policy = policy_from(Settings(actions={"refund": {"replay_window_ms": 5_000}}))
    event = intent(key="acme/refund/r1", at_ms=1_000)
    state = decide(absent(event.key), event, policy, 1_000).state
    for step in (claim(key=event.key), outcome(OutcomeStatus.SUCCEEDED, key=event.key)):
        state = decide(state, step, policy, step.at_ms).state
    assert state.phase.terminal and due_ms(state, policy) == 3_000 + 5_001
    store = MemoryPartitionStore()
    record = ChangelogRecord(0, event.key.encode(), encode_row(state), "g", Positions(1, 1),
                             due_header(deadline_basis(state))[1])
    apply_records(store, [record], Positions(5, 5), "g", policy)
    assert list(store.due_timers(2**62)) == [(8_001, event.key)]


def test_a_table_that_leaves_approval_out_keeps_the_ledgers_required_approval():
    """Only an explicit ``approval = false`` is refused; a table for a required action
    that sets other knobs is accepted, and the action still needs its approval."""
    policy = policy_from(Settings(actions={"refund": {"max_attempts": 2}},
                                  approval_required_actions=("refund",)))
    assert policy.requires_approval("refund") and policy.max_attempts_for("refund") == 2

"""Settings that loaded but did not mean what they read (found by a hostile review of the CLI,
2026-12-07), each now refused at load in one line naming the setting and where it came
from, never its value: a required action no intent can name (the approval dropped), a table
given whole and by nested keys in the environment (the nested one won without a word), a
number no later step can take, and a settings file path the system cannot look up. And the
reverse: a table setting's nested keys are never taken for a misspelling, and a refusal
names the source that gave the refused value, or every source that may have. No broker:
nothing here reaches one."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from confluent_kafka import Consumer
from pydantic import ValidationError

from ledger_stream.cli.main import main
from ledger_stream.config import Settings
from ledger_stream.processor.policy import ConfigError, policy_from
from ledger_stream.processor.runtime import Processor
from ledger_stream.settings import ConfigFileError
from ledger_stream.settings.group import MAX_MS
from ledger_stream.settings.processor import MAX_BATCH
from tests.cli_settings import isolate

pytestmark = pytest.mark.timeout(60)

ERROR = "ledger-stream: error: "
ACTION_RULE = ("an action type is one operation-key segment: 1 to 200 characters, no '/' "
               "or line break, no space at either end")
REQUIRED_RULE = (ACTION_RULE + ", no ',' (one action per entry; an action named with a "
                 "comma takes `approval = true` in its [actions] table)")


@pytest.fixture(autouse=True)
def no_kafka(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    isolate(monkeypatch, tmp_path)


def _refusal(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """What ``ledger-stream ARGV`` says when it refuses its settings: one line, exit 2."""
    assert main(list(argv or ["alerts"])) == 2
    err = capsys.readouterr().err
    assert err.startswith(ERROR) and err.count("\n") == 1, err
    return err.removeprefix(ERROR).removesuffix("\n")


# 1. A required action no intent can name ---------------------------------------------------

def test_an_action_name_operation_keys_allow_still_loads(monkeypatch: pytest.MonkeyPatch):
    """A space inside an action ("wire transfer") is in valid keys, and required approval
    before the check at load; a comma is allowed in an action's table, not in the list
    (found by the review of that check)."""
    monkeypatch.setenv("LEDGER_APPROVAL_REQUIRED_ACTIONS", '["wire transfer"]')
    monkeypatch.setenv("LEDGER_ACTIONS", '{"refund,partial": {"approval": true}}')
    policy = policy_from(Settings())
    assert policy.requires_approval("wire transfer")
    assert policy.requires_approval("refund,partial")


@pytest.mark.parametrize("entry", ["refund ", " refund", "re/fund", "", "refund,email",
                                   "refund\n"])
def test_a_required_action_no_intent_can_name_is_refused_at_load(
        entry: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    """``["refund "]`` was kept as is, and the policy then required approval of an action
    no operation key names, and not of ``refund``."""
    monkeypatch.setenv("LEDGER_APPROVAL_REQUIRED_ACTIONS", json.dumps(["email", entry]))
    with pytest.raises(ValidationError):
        Settings()
    assert _refusal(capsys) == (
        "invalid setting approval_required_actions (from LEDGER_APPROVAL_REQUIRED_ACTIONS): "
        f"entry 2: {REQUIRED_RULE}")


def test_a_required_action_spelled_as_keys_spell_it_is_required() -> None:
    settings = Settings(approval_required_actions=("refund", "send_email.v2"))
    policy = policy_from(settings)
    assert policy.requires_approval("refund") and policy.requires_approval("send_email.v2")


@pytest.mark.parametrize("entry", ["refund ", "re/fund", "refund,email"])
def test_a_required_action_no_intent_can_name_is_refused_by_the_processor_too(entry: str):
    """``model_copy(update=...)`` skips validation: the processor re-checked ``actions`` and
    the revoked key ids at start, not this list, and ran requiring approval of no action
    (found by a hostile review). Refused before any connection, by the one rule of load."""
    unchecked = Settings().model_copy(
        update={"approval_required_actions": ("email", entry)})
    assert unchecked.policy.required_actions == ("email", entry)  # kept, unvalidated
    refusal = f"LEDGER_APPROVAL_REQUIRED_ACTIONS: entry 2: {REQUIRED_RULE}"
    with pytest.raises(ConfigError) as refused:
        policy_from(unchecked)
    assert str(refused.value) == refusal
    with pytest.raises(ConfigError) as refused:  # its first step: no broker is reached
        Processor(unchecked.model_copy(update={"kafka_bootstrap": "127.0.0.1:9"}))
    assert str(refused.value) == refusal
    checked = Settings().model_copy(update={"approval_required_actions": ("refund",)})
    assert policy_from(checked).requires_approval("refund")


@pytest.mark.parametrize(("given", "refusal"), [
    ("refund", "must be a list of action types, not a str"),
    (b"refund", "must be a list of action types, not a bytes"),
    ({"refund": True}, "must be a list of action types, not a dict"),
    (("refund", 7), "entry 2: not a string (an action type)"),
    (None, "must be a list of action types, not a NoneType"),
])
def test_required_actions_that_are_not_a_list_of_names_are_refused_by_the_processor(
        given: object, refusal: str) -> None:
    """A plain string given by ``model_copy(update=...)`` (no validation) was taken letter
    by letter: approval required of the actions r, e, f, u, n and d, not of refund (found
    by a review: t14.py). Refused in one line naming the setting, not the value."""
    unchecked = Settings().model_copy(update={"approval_required_actions": given})
    with pytest.raises(ConfigError) as refused:
        policy_from(unchecked)
    assert str(refused.value) == f"LEDGER_APPROVAL_REQUIRED_ACTIONS: {refusal}"


@pytest.mark.parametrize("given", [["refund", "email"], {"email", "refund"},
                                   frozenset({"refund", "email"})])
def test_required_actions_as_any_collection_of_names_are_required(given: object) -> None:
    policy = policy_from(Settings().model_copy(
        update={"approval_required_actions": given}))
    assert policy.requires_approval("refund") and policy.requires_approval("email")
    assert not policy.requires_approval("r")


@pytest.mark.parametrize(("variable", "value", "refusal"), [
    ("LEDGER_APPROVAL_REVOKED_KEYS", '["ops-2024", "ops 2025"]',
     "approval_revoked_keys (from LEDGER_APPROVAL_REVOKED_KEYS): entry 2: an approval key id "
     "is 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit"),
    ("LEDGER_ACTIONS", '{"refund ": {"approval": true}}',
     f"actions (from LEDGER_ACTIONS): 'refund ': {ACTION_RULE}"),
])
def test_the_other_lists_of_names_refuse_a_name_that_matches_nothing_at_load(
        variable: str, value: str, refusal: str, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]):
    """A revoked key id no key can have revoked nothing (refused only when the processor
    built its keys); an action's table under a name no key names ruled nothing (refused
    only by the processor, not by the SDK and the gateway that read the same settings)."""
    monkeypatch.setenv(variable, value)
    with pytest.raises(ValidationError):
        Settings()
    assert _refusal(capsys) == f"invalid setting {refusal}"


# 2 and 3. A table setting in the environment ------------------------------------------------

@pytest.mark.parametrize(("whole", "nested"), [
    (("LEDGER_ACTIONS", '{"refund": {"approval": true}}'),
     ("LEDGER_ACTIONS__refund__approval", "false")),
    (("LEDGER_KAFKA_CLIENT", '{"client.rack": "r1"}'), ("LEDGER_KAFKA_CLIENT__client.rack", "r2")),
])
def test_a_table_given_whole_and_by_nested_keys_is_refused_naming_both(
        whole: tuple[str, str], nested: tuple[str, str], monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]):
    """The nested key won without a word: the approval the whole table asked for, dropped."""
    for name, value in (whole, nested):
        monkeypatch.setenv(name, value)
    with pytest.raises(ConfigFileError):
        Settings()
    assert _refusal(capsys) == (
        "a setting given whole and by nested keys in the environment (the nested would "
        f"override the whole without a word): {whole[0]} and {nested[0]}: keep one")


def test_nested_keys_beside_a_whole_tables_other_entries_are_merged_not_refused(
        monkeypatch: pytest.MonkeyPatch):
    """A ConfigMap's table and a Secret's nested key of it worked before the check of a
    table given twice, and must after it (found by the review of that check)."""
    monkeypatch.setenv("LEDGER_KAFKA_CLIENT", '{"security.protocol": "SASL_SSL"}')
    monkeypatch.setenv("LEDGER_KAFKA_CLIENT__sasl.password", "s")
    monkeypatch.setenv("LEDGER_ACTIONS", '{"refund": {"approval": true}}')
    monkeypatch.setenv("LEDGER_ACTIONS__email__approval", "true")
    settings = Settings()
    assert settings.connection.client == {"security.protocol": "SASL_SSL",
                                          "sasl.password": "s"}
    assert policy_from(settings).requires_approval("refund")
    assert policy_from(settings).requires_approval("email")


def test_a_table_settings_nested_keys_are_read_not_taken_for_a_misspelling(
        monkeypatch: pytest.MonkeyPatch):
    """``LEDGER_KAFKA_CLIENT__a`` was refused as a typo of ``LEDGER_KAFKA_CLIENT``."""
    monkeypatch.setenv("LEDGER_KAFKA_CLIENT__a", "1")
    monkeypatch.setenv("LEDGER_ACTIONS__refund__approval", "true")
    settings = Settings()
    assert settings.connection.client == {"a": "1"}
    assert policy_from(settings).requires_approval("refund")


def test_a_misspelled_table_with_nested_keys_is_refused(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    monkeypatch.setenv("LEDGER_ACTION__refund__approval", "true")
    assert _refusal(capsys) == ("environment variable naming no setting: "
                                "LEDGER_ACTION__refund__approval (did you mean "
                                "LEDGER_ACTIONS__...?)")


# 4. Numbers no later step can take -----------------------------------------------------------

@pytest.mark.parametrize(("variable", "value", "setting"), [
    ("LEDGER_MAX_BATCH", str(MAX_BATCH + 1), "max_batch"),
    ("LEDGER_PARTITIONS", "10001", "partitions"),
    ("LEDGER_REPLICATION_FACTOR", str(2**15), "replication_factor"),
    ("LEDGER_REPLAY_WINDOW_MS", str(2**63), "replay_window_ms"),
    ("LEDGER_COMPACTION_MARGIN_MS", str(MAX_MS + 1), "compaction_margin_ms"),
    ("LEDGER_STALL_AFTER_MS", str(2**63), "stall_after_ms"),
    ("LEDGER_SESSION_TIMEOUT_MS", "3600001", "session_timeout_ms"),
    ("LEDGER_MAX_ATTEMPTS", str(2**31), "max_attempts"),
    ("LEDGER_CONNECTOR_LEASE_MS", str(24 * 3600 * 1000 + 1), "connector_lease_ms"),
    ("LEDGER_ACTIONS", json.dumps({"refund": {"replay_window_ms": 2**63}}),
     "actions.refund.replay_window_ms"),
    ("LEDGER_ACTIONS", json.dumps({"refund": {"max_attempts": 2**31}}),
     "actions.refund.max_attempts"),
])
def test_a_number_too_large_to_work_is_refused_at_load(
        variable: str, value: str, setting: str, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]):
    monkeypatch.setenv(variable, value)
    err = _refusal(capsys)
    assert err.startswith(f"invalid setting {setting} (from {variable}): Input should be "
                          "less than or equal to "), err
    assert value not in err


def test_the_largest_batch_is_one_confluent_kafka_consumes() -> None:
    """Ground truth for MAX_BATCH: the processor calls ``consume(max_batch - 1)``."""
    consumer = Consumer({"bootstrap.servers": "127.0.0.1:1", "group.id": "bound"})
    try:
        assert consumer.consume(MAX_BATCH - 1, timeout=0) == []
        with pytest.raises(ValueError, match="num_messages"):
            consumer.consume(1_000_001, timeout=0)
    finally:
        consumer.close()
    assert Settings(max_batch=MAX_BATCH).processor.max_batch == MAX_BATCH


def test_the_longest_durations_leave_room_in_an_avro_long() -> None:
    """A deadline adds two durations to a clock reading (year 9999 here); it stays a long."""
    assert 253402300799999 + 2 * MAX_MS < 2**63
    assert Settings(replay_window_ms=MAX_MS, compaction_margin_ms=MAX_MS).topics.replay_window_ms


# 5. Where a refused value came from ------------------------------------------------------------

@pytest.mark.parametrize(("env", "flag", "where"), [
    # The flag gave another action: the refused key is LEDGER_ACTIONS' alone.
    ({"email": {"max_attempts": "x"}}, "refund.max_attempts=2",
     "actions.email.max_attempts (from LEDGER_ACTIONS)"),
    # Both gave parts of email's table, and the rule is about the table as a whole.
    ({"email": {"retry_after_lookup": "always"}}, "email.max_attempts=2",
     "actions.email (from the command line or LEDGER_ACTIONS)"),
    # Both gave the refused key: the flag's value is the one read.
    ({"email": {"max_attempts": 2}}, "email.max_attempts=x",
     "actions.email.max_attempts (from the command line)"),
])
def test_a_table_given_by_several_sources_names_the_source_honestly(
        env: dict[str, object], flag: str, where: str, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]):
    """The command line was named for a value LEDGER_ACTIONS gave."""
    monkeypatch.setenv("LEDGER_ACTIONS", json.dumps(env))
    err = _refusal(capsys, "processor", "--action-policy", flag)
    assert err.startswith(f"invalid setting {where}: "), err


def test_a_table_given_by_the_file_and_a_nested_variable_names_both(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    path = tmp_path / "ledger.toml"
    path.write_text('[kafka_client]\n"enable.idempotence" = "false"\n')
    monkeypatch.setenv("LEDGER_KAFKA_CLIENT__client.rack", "r1")
    assert _refusal(capsys, "alerts", "--config", str(path)) == (
        f"invalid setting kafka_client (from LEDGER_KAFKA_CLIENT__client.rack or {path}): "
        "may not set enable.idempotence: the ledger sets them per client, and its guarantees "
        "depend on them")


def test_a_rule_of_a_group_names_the_settings_it_is_about(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    """It said ``invalid setting connection``, a name no source uses."""
    monkeypatch.setenv("LEDGER_KAFKA_CLIENT", '{"sasl.password": "hunter2"}')
    monkeypatch.setenv("LEDGER_KAFKA_SASL_PASSWORD", "swordfish")
    err = _refusal(capsys)
    assert err == (
        "invalid setting kafka_client (from LEDGER_KAFKA_CLIENT) and kafka_sasl_password "
        "(from LEDGER_KAFKA_SASL_PASSWORD): sasl.password set both in kafka_client and by "
        "kafka_sasl_password: keep one")
    assert not {"hunter2", "swordfish"} & set(re.findall(r"\w+", err))


# 6. A settings file path the system cannot look up ---------------------------------------------

def test_a_config_path_too_long_for_the_system_is_one_line(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    """It raised OSError [Errno 36] from the file's existence check, a traceback."""
    path = "a" * 5000
    monkeypatch.setenv("LEDGER_CONFIG", path)
    with pytest.raises(ConfigFileError, match=r"^config file a{200}\.\.\. \(5000 characters\): "
                       "File name too long$"):
        Settings()
    monkeypatch.delenv("LEDGER_CONFIG")
    assert _refusal(capsys, "alerts", "--config", path) == (
        f"config file {path[:200]}... (5000 characters): File name too long")

"""The TOML settings file loses nothing without a word (found by a hostile review,
2026-12-07): a file that is named but missing, a directory, not TOML or not UTF-8, or that
names a top-level setting or table no setting reads (``[action.refund]`` for
``[actions.refund]``) is refused, with the name meant when one is close, instead of
leaving the defaults in force (a refund dispatched without the approval the file asked
for). Every command that reads settings says so in one line and exits 2; the docs' own
example file still loads in each of them. No broker: nothing here reaches one."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from ledger_stream.cli.main import main
from ledger_stream.config import Settings, load_settings
from ledger_stream.kafka.topics import ledger_topics
from ledger_stream.processor.policy import policy_from
from ledger_stream.settings import ConfigFileError
from ledger_stream.settings.topics import PREFIX_MAX
from tests.cli_settings import isolate

pytestmark = pytest.mark.timeout(60)

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"

# Every command that reads settings (each has --config), with the arguments it needs to get
# as far as reading them.
COMMANDS: list[list[str]] = [
    ["topics", "create"], ["acls", "apply", "--principal", "User:p"], ["processor"],
    ["connector", "http", "--name", "p", "--base-url", "http://127.0.0.1:1"],
    ["connector", "postgres", "--name", "p", "--dsn", "postgresql://x@127.0.0.1:1/x",
     "--effect-sql", "select 1"],
    ["connector", "smtp", "--name", "s"], ["view"], ["receipts", "a/refund/x"], ["alerts"],
    ["inspect", "a/refund/x"], ["evidence", "a/refund/x"], ["reconcile", "list"],
    ["reconcile", "resolve", "a/refund/x", "--failed", "--attempt", "1", "--reason", "r"],
    ["freeze", "refund", "--reason", "r"], ["unfreeze", "refund"], ["freezes"],
    ["approve", "a/refund/x", "0" * 64],
    ["mcp", "--tenant", "a", "--effects", "pay=refund@payments[invoice]"], ["api"],
    ["watch", "sandbox", "--name", "p", "--base-url", "http://127.0.0.1:1"],
    ["upgrade-check", "--graph", "os:path", "--checkpointer", "x"], ["repartition", "--to", "24"],
    ["replay-plan", "--graph", "os:path", "--checkpointer", "x", "--thread", "t"],
    ["drain", "--graph", "g", "--version", "v"], ["bench"], ["demo"], ["falsify"],
    ["kafka", "up"], ["kafka", "status"], ["kafka", "down"], ["kafka", "fetch"],
]
IDS = [" ".join(argv[:2]) for argv in COMMANDS]


def _main(argv: list[str], monkeypatch: pytest.MonkeyPatch) -> int:
    if argv[0] == "falsify":  # runs only from a source checkout, before reading settings
        monkeypatch.chdir(ROOT)
    return main(argv)


@pytest.fixture(autouse=True)
def no_kafka(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    isolate(monkeypatch, tmp_path)


def _file(tmp_path: Path, text: str | bytes, name: str = "ledger.toml") -> str:
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return str(path)


def _docs_example() -> str:
    text = (DOCS / "operations.md").read_text()
    block = re.search(r"```toml\n(# ledger\.toml .*?)```", text, re.S)
    assert block, "docs/operations.md shows no ledger.toml"
    return block.group(1)


def test_the_reviewers_misspelled_approval_is_refused_naming_what_was_meant(tmp_path: Path):
    typo = _file(tmp_path, 'approval_required_action = ["refund"]\n'
                 "[action.refund]\napproval = true\n")
    with pytest.raises(ConfigFileError) as refused:
        load_settings(config_file=typo)
    assert str(refused.value) == (
        f"config file {typo}: unknown settings 'approval_required_action' (did you mean "
        "'approval_required_actions'?), 'action' (did you mean 'actions'?)")
    # Spelled right, the same file asks the processor for an approval.
    right = _file(tmp_path, 'approval_required_actions = ["refund"]\n'
                  "[actions.refund]\napproval = true\n", "right.toml")
    assert policy_from(load_settings(config_file=right)).requires_approval("refund")


@pytest.mark.parametrize(("text", "refusal"), [
    ("replay_windows_ms = 1000\n", "unknown setting 'replay_windows_ms' (did you mean "
     "'replay_window_ms'?)"),
    ("[PROCESSOR]\nmax_batch = 3\n", "unknown setting 'PROCESSOR' (did you mean 'processor'?)"),
    ("zzz = 1\n", "unknown setting 'zzz'"),
    ("[processor]\nmax_batch = 3\n[zzz]\n", "unknown setting 'zzz'"),
])
def test_a_name_no_setting_reads_is_refused(tmp_path: Path, text: str, refusal: str):
    path = _file(tmp_path, text)
    with pytest.raises(ConfigFileError, match=re.escape(f"config file {path}: {refusal}")):
        load_settings(config_file=path)


@pytest.mark.parametrize(("text", "twice"), [
    ('approval_required_actions = []\n[policy]\napproval_required_actions = ["refund"]\n',
     "'approval_required_actions' and [policy] 'approval_required_actions'"),
    ("max_batch = 7\n[processor]\nmax_batch = 9\n", "'max_batch' and [processor] 'max_batch'"),
    ('approval_required_actions = []\n[policy]\nrequired_actions = ["refund"]\n',
     "'approval_required_actions' and [policy] 'required_actions'"),
    ("max_batch = 7\nMAX_BATCH = 9\n", "'max_batch' and 'MAX_BATCH'"),
])
def test_a_setting_given_twice_is_refused(tmp_path: Path, text: str, twice: str):
    """One of the two was dropped without a word: the flat name won over its group's
    table (an approval the table asked for was lost), one case over another (found by the
    hostile review of the file check)."""
    path = _file(tmp_path, text)
    with pytest.raises(ConfigFileError, match=re.escape(
            f"config file {path}: set twice (one would be dropped): {twice}")):
        load_settings(config_file=path)


def test_what_the_settings_read_is_accepted(tmp_path: Path):
    # A flat name in any case, a group's table, an action's table, the client's free table.
    path = _file(tmp_path, 'PARTITIONS = 3\n[processor]\nmax_batch = 7\n[actions.refund]\n'
                 'approval = true\n[kafka_client]\n"client.rack" = "r1"\n')
    settings = load_settings(config_file=path)
    assert (settings.topics.partitions, settings.processor.max_batch,
            settings.connection.client) == (3, 7, {"client.rack": "r1"})
    assert policy_from(settings).requires_approval("refund")


@pytest.mark.parametrize(("path", "refusal"), [
    ("missing.toml", "no such file"), (".", "not a regular file")])
def test_a_named_file_that_is_not_there_is_refused(tmp_path: Path, monkeypatch, path: str,
                                                    refusal: str):
    monkeypatch.setenv("LEDGER_CONFIG", str(tmp_path / path))
    with pytest.raises(ConfigFileError, match=f": {refusal}$"):
        Settings()  # the SDK's way: LEDGER_CONFIG alone


@pytest.mark.parametrize(("text", "refusal"), [
    ("root:x:0:0:root:/root:/bin/bash\n", "is not valid TOML: Expected '=' after a key"),
    (b"\xff\xfe bad", "is not UTF-8 text: 'utf-8' codec can't decode byte 0xff"),
])
def test_a_file_that_is_not_utf8_toml_is_refused(tmp_path: Path, text: str | bytes,
                                                 refusal: str):
    path = _file(tmp_path, text)
    with pytest.raises(ConfigFileError, match=re.escape(f"config file {path} {refusal}")):
        load_settings(config_file=path)


class _Built(Exception):
    def __init__(self, settings: Settings) -> None:
        self.settings = settings


@pytest.fixture
def stop_once_built(monkeypatch: pytest.MonkeyPatch) -> None:
    """A command stops as soon as its settings are built (raising ``_Built``): nothing runs."""
    import ledger_stream.config

    def built(*args: Any, **kwargs: Any) -> Settings:
        raise _Built(load_settings(*args, **kwargs))

    monkeypatch.setattr(ledger_stream.config, "load_settings", built)


@pytest.mark.parametrize("argv", COMMANDS, ids=IDS)
@pytest.mark.usefixtures("stop_once_built")
def test_every_command_reads_the_docs_example_file(argv: list[str], tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch):
    with pytest.raises(_Built) as built:
        _main([*argv, "--config", _file(tmp_path, _docs_example())], monkeypatch)
    settings = built.value.settings
    assert settings.processor.max_attempts == 5
    assert policy_from(settings).requires_approval("refund")


@pytest.mark.parametrize("argv", COMMANDS, ids=IDS)
@pytest.mark.parametrize(("text", "refusal"), [
    ("[action.refund]\napproval = true\n", "unknown setting 'action' (did you mean 'actions'?)"),
    (None, "no such file"),
    ("[actions.refund\n", "is not valid TOML"),
])
@pytest.mark.usefixtures("stop_once_built")
def test_every_command_refuses_a_file_it_cannot_use_in_one_line(
        argv: list[str], text: str | None, refusal: str, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    path = str(tmp_path / "ledger.toml") if text is None else _file(tmp_path, text)
    assert _main([*argv, "--config", path], monkeypatch) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"ledger-stream: error: config file {path}") and refusal in err, err
    assert err.count("\n") == 1, err


def test_an_environment_variable_a_letter_off_a_setting_is_refused(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    """``LEDGER_APPROVAL_REQUIRED_ACTION`` (no S) left the approval out without a word, as
    the file's typo did (noticed after the file check: the environment was still lax)."""
    monkeypatch.setenv("LEDGER_APPROVAL_REQUIRED_ACTION", '["refund"]')
    with pytest.raises(ConfigFileError, match=re.escape(
            "environment variable naming no setting: LEDGER_APPROVAL_REQUIRED_ACTION "
            "(did you mean LEDGER_APPROVAL_REQUIRED_ACTIONS?)")):
        Settings()
    assert main(["alerts"]) == 2
    err = capsys.readouterr().err
    assert "LEDGER_APPROVAL_REQUIRED_ACTION (did you mean" in err and err.count("\n") == 1


def test_other_ledger_variables_are_left_alone(monkeypatch: pytest.MonkeyPatch):
    """The lab's, the build's, a nested name (``__``: a dict setting's key) and names far
    from any setting."""
    for name in ("LEDGER_BENCH_PARTITIONS", "LEDGER_SIM_RUNS", "LEDGER_BUILD_CORE",
                 "LEDGER_KAFKA_CLIENT__CLIENT_RACK", "LEDGER_CORE", "LEDGER_VIEW_KEY",
                 "EDGER_MAX_BATCH"):  # the last: not ours, however close
        monkeypatch.setenv(name, "3")
    monkeypatch.setenv("LEDGER_MAX_BATCH", "3")
    assert Settings().processor.max_batch == 3


INTEGER = "Input should be a valid integer, unable to parse string as an integer"


@pytest.mark.parametrize("argv", COMMANDS, ids=IDS)
@pytest.mark.usefixtures("stop_once_built")
def test_every_command_names_a_wrong_value_and_where_it_came_from(
        argv: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]):
    """A value of the wrong type printed pydantic's report, its line breaks as ``\\n`` and
    its help URL, and said neither which file nor which variable gave the value (noticed
    2026-12-07). Now: one line, each setting by the name the file and the environment use,
    with where its value came from, and what is wrong."""
    path = _file(tmp_path, 'max_batch = "lots"\n[connector]\nmax_in_flight = 0\n')
    monkeypatch.setenv("LEDGER_SESSION_TIMEOUT_MS", "soon")
    assert _main([*argv, "--config", path], monkeypatch) == 2
    assert capsys.readouterr().err == (
        f"ledger-stream: error: invalid setting max_batch (from {path}): {INTEGER}; "
        f"session_timeout_ms (from LEDGER_SESSION_TIMEOUT_MS): {INTEGER}; "
        f"connector_max_in_flight (from {path}): Input should be greater than or equal "
        "to 1\n")


def test_a_wrong_value_is_traced_to_the_source_that_won_and_never_shown(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    path = _file(tmp_path, "session_timeout_ms = 30000\n")
    monkeypatch.setenv("ledger_session_timeout_ms", "soon")  # over the file's, any case
    monkeypatch.setenv("LEDGER_KAFKA_CLIENT", '{"sasl.password": ["hunter2"]}')
    assert main(["processor", "--config", path,
                 "--action-policy", "refund.max_attempts=twice"]) == 2
    err = capsys.readouterr().err
    assert "session_timeout_ms (from ledger_session_timeout_ms)" in err, err
    assert ("kafka_client.sasl.password (from LEDGER_KAFKA_CLIENT): Input should be a valid "
            "string") in err, err
    assert "actions.refund.max_attempts (from the command line)" in err, err
    assert err.count("\n") == 1 and not {"hunter2", "soon", "twice", "pydantic"} & set(
        re.findall(r"\w+", err)), err


def test_an_environment_table_that_is_not_json_is_one_line_not_a_traceback(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    monkeypatch.setenv("LEDGER_KAFKA_CLIENT", "sasl.password=hunter2")
    assert main(["alerts"]) == 2
    assert capsys.readouterr().err == (
        "ledger-stream: error: invalid setting kafka_client (from LEDGER_KAFKA_CLIENT): not "
        "JSON (in the environment a table is written as a JSON object, a list as a JSON "
        "array)\n")


@pytest.mark.parametrize("prefix", ["acme/prod", "", "ledger prod", "x" * (PREFIX_MAX + 1)])
def test_a_topic_prefix_kafka_cannot_name_a_topic_with_is_refused_at_once(
        prefix: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    """It got as far as the broker (or a wait for a topic that cannot exist) before."""
    monkeypatch.setenv("LEDGER_TOPIC_PREFIX", prefix)
    assert main(["alerts"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ledger-stream: error: invalid setting topic_prefix (from "
                          "LEDGER_TOPIC_PREFIX): a topic prefix takes "), err


def test_the_longest_prefix_allowed_names_every_ledger_topic_within_kafkas_limit() -> None:
    settings = Settings(topic_prefix="p" * PREFIX_MAX)
    longest = max(len(spec.name) for spec in ledger_topics(settings))
    assert longest == 249, longest
    assert Settings(topic_prefix="Acme_prod-2.ledger").topics.prefix == "Acme_prod-2.ledger"

"""The product (``ledger_stream``) apart from the lab (``ledger_lab``): every command users
had keeps working on ``ledger-stream``, the lab's through the plugin seam, and the product
reaches the local Kafka only through its entry point."""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata
from pathlib import Path
from types import SimpleNamespace

import pytest

from ledger_stream.cli import main as cli
from ledger_stream.config import Settings
from ledger_stream.kafka import bootstrap
from ledger_stream.kafka.exceptions import NoKafkaError

REPO = Path(__file__).resolve().parents[1]

# Every command (and action) of `ledger-stream` before the lab moved out, from its parser.
COMMANDS_USERS_HAD = (
    "kafka up", "kafka status", "kafka down", "kafka fetch", "topics create", "acls apply",
    "processor", "connector http", "connector postgres", "connector smtp", "view", "receipts",
    "alerts", "inspect", "evidence", "reconcile list", "reconcile resolve", "freeze",
    "unfreeze", "freezes", "approve", "approval-keys generate", "sandbox", "demo", "falsify",
    "bench", "simulate", "fuzz", "chaos", "mcp", "api", "watch", "upgrade-check",
    "repartition",
)


@pytest.mark.parametrize("command", COMMANDS_USERS_HAD)
def test_every_command_users_had_still_parses_its_help(command, capsys):
    with pytest.raises(SystemExit) as done:
        cli.build_parser().parse_args([*command.split(), "--help"])
    assert done.value.code == 0
    assert f"usage: ledger-stream {command}" in capsys.readouterr().out


def test_the_installed_command_runs_a_lab_command():
    command = Path(sys.executable).parent / "ledger-stream"
    done = subprocess.run([str(command), "simulate", "--runs", "3", "--seed", "7"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_the_lab_commands_come_from_entry_points_not_from_the_product():
    declared = {entry.name for entry in metadata.entry_points(group=cli.COMMAND_PLUGINS)}
    assert declared == {"bench", "chaos", "demo", "falsify", "fuzz", "kafka", "sandbox",
                        "simulate"}
    product_modules = {command.__name__ for command in cli.COMMANDS}
    assert all(name.startswith("ledger_stream.cli.") for name in product_modules)


def test_a_broken_plugin_is_named_and_the_product_commands_still_work(monkeypatch, capsys):
    # Its package is installed but the module fails to import (a package not installed at
    # all is a product-only install: see the next test).
    broken = metadata.EntryPoint("broken", "ledger_stream.no_such_cmd", cli.COMMAND_PLUGINS)
    monkeypatch.setattr(cli.metadata, "entry_points", lambda group: [broken])
    parser = cli.build_parser()
    assert "'broken' (ledger_stream.no_such_cmd) not loaded" in capsys.readouterr().err
    assert parser.parse_args(["topics", "create"]).command == "topics"


# The container image (deploy/Dockerfile) installs the product without ledger_lab, while
# the distribution's metadata still declares the lab's entry points.
WITHOUT_THE_LAB = """
import sys
sys.modules["ledger_lab"] = None  # as if not installed: importing it fails
from ledger_stream.cli.main import build_parser
from ledger_stream.config import Settings
from ledger_stream.kafka.bootstrap import resolve_bootstrap
from ledger_stream.kafka.exceptions import NoKafkaError
assert "kafka" not in build_parser().format_help()
try:
    resolve_bootstrap(Settings(kafka_bootstrap=""))
except NoKafkaError as exc:
    print(exc)
"""


def test_without_the_lab_installed_the_product_runs_quietly():
    done = subprocess.run([sys.executable, "-c", WITHOUT_THE_LAB], capture_output=True,
                          text=True, timeout=120, cwd=REPO)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""  # no "command 'bench' not loaded" line per lab command
    assert "run `ledger-stream kafka up` or set LEDGER_KAFKA_BOOTSTRAP" in done.stdout


def test_the_product_never_imports_the_lab():
    done = subprocess.run([str(Path(sys.executable).parent / "lint-imports")], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "The product never imports the lab KEPT" in done.stdout


def test_bootstrap_comes_from_the_settings_before_any_development_cluster(monkeypatch):
    monkeypatch.setattr(bootstrap, "cluster_finders", lambda: iter([_never_called]))
    assert bootstrap.resolve_bootstrap(Settings(kafka_bootstrap="k:9092")) == "k:9092"


def test_without_an_address_the_declared_development_cluster_is_asked(monkeypatch):
    finders = [lambda settings: None, lambda settings: f"local-of-{settings.home.name}:1"]
    monkeypatch.setattr(bootstrap, "cluster_finders", lambda: iter(finders))
    settings = Settings(kafka_bootstrap="", home=Path("/tmp/h1"))
    assert bootstrap.resolve_bootstrap(settings) == "local-of-h1:1"


def test_no_address_and_no_running_cluster_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(bootstrap, "cluster_finders", lambda: iter([lambda settings: None]))
    with pytest.raises(NoKafkaError, match="ledger-stream kafka up"):
        bootstrap.resolve_bootstrap(Settings(kafka_bootstrap=""))


def test_the_lab_declares_the_local_cluster_finder(tmp_path):
    (find,) = list(bootstrap.cluster_finders())
    assert find.__module__ == "ledger_lab.local_kafka.address"
    assert find(Settings(kafka_bootstrap="", home=tmp_path)) is None  # none runs there


def _never_called(settings: object) -> SimpleNamespace:
    raise AssertionError("a configured address must win")


PRODUCT = ("ledger_stream", "connectors")
MAX_PRODUCT_LINES = 450


def test_no_product_file_is_over_450_lines():
    long = {str(path.relative_to(REPO)): lines
            for package in PRODUCT for path in (REPO / package).rglob("*.py")
            if (lines := len(path.read_text().splitlines())) > MAX_PRODUCT_LINES}
    assert long == {}


def test_no_import_cycle_between_the_product_modules():
    grimp = pytest.importorskip("grimp")  # import-linter's graph (a dev dependency)
    graph = grimp.build_graph(*PRODUCT)
    cycles = [sorted(group) for group in _strongly_connected(graph) if len(group) > 1]
    assert cycles == []


def _strongly_connected(graph) -> list[set[str]]:
    """Tarjan's strongly connected components of the module import graph (iterative)."""
    modules = sorted(graph.modules)
    edges = {m: sorted(graph.find_modules_directly_imported_by(m) & graph.modules)
             for m in modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []
    for root in modules:
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            node, child = work.pop()
            if child == 0:
                index[node] = low[node] = len(index)
                stack.append(node)
                on_stack.add(node)
            if child < len(edges[node]):
                work.append((node, child + 1))
                nxt = edges[node][child]
                if nxt not in index:
                    work.append((nxt, 0))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            for nxt in edges[node]:
                if nxt in on_stack:
                    low[node] = min(low[node], low[nxt])
            if low[node] == index[node]:
                group = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.add(member)
                    if member == node:
                        break
                groups.append(group)
    return groups


@pytest.mark.parametrize(("name", "value", "says"), [
    ("LEDGER_SIM_RUNS", "abc", "LEDGER_SIM_RUNS: 'abc' is not a whole number"),
    ("LEDGER_SIM_RUNS", "0", "LEDGER_SIM_RUNS: 0 is not from 1"),
    ("LEDGER_SIM_SEED", "one", "LEDGER_SIM_SEED: 'one' is not a whole number"),
    ("LEDGER_SIM_WORKERS", "-1", "LEDGER_SIM_WORKERS: -1 is not from 0"),
])
def test_a_simulate_variable_that_is_no_count_is_one_line_naming_it(
        name, value, says, monkeypatch, capsys):
    # `LEDGER_SIM_RUNS=abc ledger-stream simulate` exited 1, from a SystemExit raised while
    # the parser was built (`ledger-stream --help` ended there too).
    monkeypatch.setenv(name, value)
    assert cli.main(["simulate", "--runs", "1"] if name != "LEDGER_SIM_RUNS" else
                    ["simulate", "--workers", "1"]) == 2
    said = capsys.readouterr()
    assert said.err.count("\n") == 1 and says in said.err, said.err


def test_a_bad_simulate_variable_leaves_the_command_list_alone(monkeypatch, capsys):
    monkeypatch.setenv("LEDGER_SIM_RUNS", "abc")
    with pytest.raises(SystemExit) as done:
        cli.main(["--help"])
    assert done.value.code == 0 and "simulate" in capsys.readouterr().out


def test_simulate_takes_its_variables_when_no_flag_is_given(monkeypatch, capsys):
    monkeypatch.setenv("LEDGER_SIM_RUNS", "2")
    monkeypatch.setenv("LEDGER_SIM_SEED", "7")
    monkeypatch.setenv("LEDGER_SIM_WORKERS", "1")
    assert cli.main(["simulate"]) == 0
    summary = capsys.readouterr().out
    assert '"first_seed": 7' in summary and '"runs": 2' in summary and \
        '"workers": 1' in summary, summary

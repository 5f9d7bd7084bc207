"""The operator's path end to end: `kafka up`, `topics create`, `kafka status`, `kafka down`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ledger_lab.local_kafka import LocalCluster, jar_cache
from ledger_lab.local_kafka.ports import pick_free_ports, port_is_free
from ledger_stream.config import Settings
from ledger_stream.kafka.topics import LEDGER_TOPICS


def _free_port_pair() -> int:
    """A port N with N and N+1 free (the 1-node cluster's broker and controller)."""
    for _ in range(50):
        (port,) = pick_free_ports(1)
        if port < 65535 and port_is_free(port + 1):
            return port
    raise RuntimeError("no two consecutive free ports found")


@pytest.mark.kafka
@pytest.mark.own_cluster
@pytest.mark.timeout(240)
def test_up_topics_status_down(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEDGER_")}
    # An isolated home; the jars come from the user's shared cache without LEDGER_JAR_CACHE
    # (fetched once per machine, whatever --home or LEDGER_HOME a command is given).
    env |= {"LEDGER_HOME": str(home)}
    assert jar_cache(Settings(home=home)) == jar_cache(Settings())
    port = _free_port_pair()

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "ledger_stream.cli.main", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=150,
        )

    try:
        up = cli("kafka", "up", "--port", str(port))
        assert up.returncode == 0, up.stderr
        assert f"ready at 127.0.0.1:{port}" in up.stdout
        assert not (home / "jars").exists()  # nothing fetched again into the new home
        assert f"stop it with `ledger-stream kafka down --home {home}`" in up.stdout

        # A `down` aimed at a home without a broker says so, and fails naming the one that runs.
        missed = cli("kafka", "down", "--home", str(tmp_path / "elsewhere"))
        assert missed.returncode == 1, missed.stdout
        assert f"no local Kafka running in {tmp_path / 'elsewhere' / 'cluster'}" in missed.stdout
        named = f"runs in {home / 'cluster'}: stop it with `ledger-stream kafka down --home {home}`"
        assert named in missed.stderr

        again = cli("kafka", "up")
        assert again.returncode == 0 and "already running" in again.stdout

        scripted = json.loads(cli("kafka", "up", "--json").stdout)  # for scripts: one object
        assert (scripted["bootstrap"], scripted["running"], scripted["started"]) == (
            f"127.0.0.1:{port}", True, False)
        assert [n["broker"] for n in scripted["nodes"]] == [f"127.0.0.1:{port}"]
        assert all(isinstance(n["pid"], int) and n["alive"] for n in scripted["nodes"])

        created = cli("topics", "create", "--partitions", "3")
        assert created.returncode == 0, created.stderr
        assert created.stdout.count(": created") == len(LEDGER_TOPICS)

        repeated = cli("topics", "create", "--partitions", "3")
        assert repeated.returncode == 0 and repeated.stdout.count(": exists") == len(LEDGER_TOPICS)

        differing = cli("topics", "create", "--partitions", "4")
        assert differing.returncode == 2
        assert "DIFFERS: partitions 3, expected 4" in differing.stdout
        assert "differ from the settings" in differing.stderr

        status = cli("kafka", "status")
        assert status.returncode == 0
        assert f"running at 127.0.0.1:{port}" in status.stdout and "pid" in status.stdout
    finally:
        down = cli("kafka", "down")
        LocalCluster(home / "cluster").stop()  # by PID, in case `down` itself failed
    assert down.returncode == 0 and "stopped local Kafka" in down.stdout
    after = cli("kafka", "status")
    assert after.returncode == 1 and "stopped" in after.stdout
    stopped = cli("kafka", "status", "--json")
    assert stopped.returncode == 1 and json.loads(stopped.stdout)["running"] is False


def test_topics_help_names_every_ledger_topic() -> None:
    """The help is derived from the topic list, so a new topic shows up without a doc edit."""
    done = subprocess.run([sys.executable, "-m", "ledger_stream.cli.main", "topics", "--help"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    text = " ".join(done.stdout.split())
    assert f"The {len(LEDGER_TOPICS)} ledger topics" in text
    assert all(topic in text for topic in LEDGER_TOPICS), text

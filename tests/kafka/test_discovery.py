"""Finding the local clusters of this project that run, whatever their home: a broker
counts only when its command line names a node's server.properties in a folder holding
cluster.json, so a Kafka started by anything else is never named (and never offered to
`kafka down`). /proc is replaced by a folder of the same shape."""

from __future__ import annotations

from pathlib import Path

import pytest

from ledger_lab.local_kafka import discovery
from ledger_stream.cli.main import main


def process(proc: Path, pid: int, *arguments: str) -> None:
    (proc / str(pid)).mkdir(parents=True)
    (proc / str(pid) / "cmdline").write_bytes(b"\0".join(a.encode() for a in arguments) + b"\0")


def broker(cluster: Path, node: int = 1) -> tuple[str, ...]:
    return ("java", "-Xmx1g", "-cp", "/jars/*", "kafka.Kafka",
            str(cluster / f"node-{node}" / "server.properties"))


def test_only_brokers_beside_a_cluster_json_are_found(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    proc, ours, foreign = tmp_path / "proc", tmp_path / "home" / "cluster", tmp_path / "other"
    (ours / "cluster.json").parent.mkdir(parents=True)
    (ours / "cluster.json").write_text("{}")
    process(proc, 10, *broker(ours, 1))
    process(proc, 11, *broker(ours, 2))
    process(proc, 12, *broker(foreign))  # a Kafka of someone else: no cluster.json
    process(proc, 13, "python", "-m", "kafka.Kafka")
    (proc / "self").mkdir()
    monkeypatch.setattr(discovery, "PROC", proc)
    assert discovery.running_clusters() == [ours.resolve()]


def test_down_on_an_empty_home_exits_0_when_no_other_cluster_runs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "proc").mkdir()
    monkeypatch.setattr(discovery, "PROC", tmp_path / "proc")
    assert main(["kafka", "down", "--home", str(tmp_path / "home")]) == 0
    out = capsys.readouterr()
    assert f"no local Kafka running in {tmp_path / 'home' / 'cluster'}" in out.out
    assert out.err == ""

"""Which local clusters of this project run on the machine, whatever their ``--home``.

A broker of a local cluster runs ``kafka.Kafka <cluster>/node-N/server.properties`` and its
cluster folder holds ``cluster.json``; both are required, so a Kafka started by anything
else is never named. Read from /proc (Linux); elsewhere nothing is found.
"""

from __future__ import annotations

from pathlib import Path

from ledger_lab.local_kafka.node import BROKER_MAIN
from ledger_lab.local_kafka.state import STATE_FILE

PROC = Path("/proc")


def running_clusters() -> list[Path]:
    """The cluster folders (sorted, resolved) with at least one broker process running."""
    found: set[Path] = set()
    for entry in _pid_dirs():
        arguments = _arguments(entry)
        if BROKER_MAIN not in arguments or not arguments[-1].endswith("server.properties"):
            continue
        cluster_dir = Path(arguments[-1]).parent.parent
        if (cluster_dir / STATE_FILE).is_file():
            found.add(cluster_dir.resolve())
    return sorted(found)


def _pid_dirs() -> list[Path]:
    try:
        return [entry for entry in PROC.iterdir() if entry.name.isdigit()]
    except OSError:
        return []


def _arguments(pid_dir: Path) -> list[str]:
    try:
        raw = (pid_dir / "cmdline").read_bytes()
    except OSError:  # gone, or not ours to read
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]

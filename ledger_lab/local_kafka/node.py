"""One local broker process: format its storage, launch it, ask whether it lives, signal it.

Processes are addressed by PID only, and a PID counts as a node only while its command line
still names that node's ``server.properties``: a recycled PID is never signalled.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterable
from pathlib import Path

from ledger_lab.local_kafka.server_properties import NodeSpec
from ledger_stream.kafka.exceptions import BrokerStartError

STORAGE_TOOL = "kafka.tools.StorageTool"
BROKER_MAIN = "kafka.Kafka"
HEAP_ONE_NODE = ("-Xms512m", "-Xmx1g")
HEAP_PER_NODE_IN_CLUSTER = ("-Xms512m", "-Xmx768m")
LOG_TAIL_LINES = 40
CMDLINE_RETRIES = 50

# Brokers started by this process, kept so Python neither warns about a running child when
# its Popen is collected nor reaps it behind our back; a PID outside it is checked in /proc.
_started: dict[int, subprocess.Popen[bytes]] = {}


def _java_command(java: str, libs: Path, *args: str, jvm: Iterable[str] = ()) -> list[str]:
    return [java, *jvm, "-cp", f"{libs}/*", *args]


def random_cluster_id(java: str, libs: Path) -> str:
    """A fresh cluster id from ``StorageTool random-uuid``."""
    result = _run_tool(_java_command(java, libs, STORAGE_TOOL, "random-uuid"), "random-uuid")
    return result.strip().splitlines()[-1].strip()


def format_storage(java: str, libs: Path, nodes: Iterable[NodeSpec], cluster_id: str) -> None:
    """Format every node's log dir for ``cluster_id`` (static quorum, so no --standalone).

    Already formatted folders are kept as they are (``--ignore-formatted``), so a stopped
    cluster restarts with its topics. Runs the nodes' formats in parallel.
    """
    running = []
    for node in nodes:
        command = _java_command(
            java,
            libs,
            STORAGE_TOOL,
            "format",
            "--ignore-formatted",
            "-t",
            cluster_id,
            "-c",
            str(node.properties_path),
        )
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        running.append((node, process))
    for node, process in running:
        output, _ = process.communicate()
        if process.returncode != 0:
            raise BrokerStartError(
                f"formatting the storage of node {node.node_id} failed (exit {process.returncode})",
                _last_lines(output),
            )


def launch(java: str, libs: Path, node: NodeSpec, heap: tuple[str, ...], log4j: Path) -> int:
    """Start the broker of ``node`` in its own session (it outlives the caller) and return
    its PID. stdout and stderr go to ``node.log_path``; the previous log is kept as ``.1``."""
    if node.log_path.exists():
        node.log_path.replace(node.log_path.with_suffix(".log.1"))
    jvm = (
        *heap,
        "-XX:+UseG1GC",
        "-XX:+ExitOnOutOfMemoryError",
        "-Djava.awt.headless=true",
        f"-Dlog4j2.configurationFile={log4j}",
    )
    command = _java_command(java, libs, BROKER_MAIN, str(node.properties_path), jvm=jvm)
    with node.log_path.open("wb") as log:
        process = subprocess.Popen(
            command,
            cwd=node.dir,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    _started[process.pid] = process
    return process.pid


def is_alive(pid: int, node: NodeSpec) -> bool:
    """True while ``pid`` runs and is this node's broker (reaps it if this process started it)."""
    child = _started.get(pid)
    if child is not None:
        if child.poll() is None:
            return True
        del _started[pid]
        return False
    command_line = _command_line(pid)
    return command_line is not None and str(node.properties_path) in command_line


def signal_pid(pid: int, node: NodeSpec, signum: signal.Signals) -> bool:
    """Send ``signum`` to the node's process; False when it no longer runs."""
    if not is_alive(pid, node):
        return False
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        return False
    return True


def stop(processes: dict[int, NodeSpec], timeout_s: float = 30.0) -> list[int]:
    """SIGTERM every process, wait up to ``timeout_s`` for all to exit, then SIGKILL the
    rest. Returns the PIDs that needed SIGKILL."""
    for pid, node in processes.items():
        signal_pid(pid, node, signal.SIGTERM)
    if _wait_all_exit(processes, timeout_s):
        return []
    killed = [pid for pid, node in processes.items() if signal_pid(pid, node, signal.SIGKILL)]
    _wait_all_exit(processes, 10.0)
    return killed


def log_tail(node: NodeSpec, lines: int = LOG_TAIL_LINES) -> str:
    """The last ``lines`` lines of the node's broker log ('' when there is none)."""
    try:
        return _last_lines(node.log_path.read_bytes().decode(errors="replace"), lines)
    except FileNotFoundError:
        return ""


def _wait_all_exit(processes: dict[int, NodeSpec], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while any(is_alive(pid, node) for pid, node in processes.items()):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)
    return True


def _command_line(pid: int) -> str | None:
    """The command line of ``pid``, or None when it is gone, a zombie or a kernel thread."""
    proc = Path(f"/proc/{pid}")
    if not Path("/proc/self").exists():
        return _command_line_from_ps(pid)
    # Right after fork and during exec the command line reads empty for a moment; only a
    # zombie (or a kernel thread, never ours) stays empty.
    for _ in range(CMDLINE_RETRIES):
        try:
            raw = (proc / "cmdline").read_bytes()
            if raw:
                return raw.replace(b"\0", b" ").decode(errors="replace")
            state = (proc / "stat").read_text().rpartition(")")[2].split()[0]
        except (FileNotFoundError, ProcessLookupError, PermissionError, IndexError):
            return None
        if state in ("Z", "X"):
            return None
        time.sleep(0.01)
    return None


def _command_line_from_ps(pid: int) -> str | None:
    result = subprocess.run(
        ["ps", "-o", "command=", "-p", str(pid)], capture_output=True, text=True, check=False
    )
    return result.stdout.strip() or None


def _run_tool(command: list[str], what: str) -> str:
    result = subprocess.run(
        command,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    if result.returncode != 0:
        raise BrokerStartError(f"`{what}` failed (exit {result.returncode})", result.stdout)
    return str(result.stdout)


def _last_lines(text: str, lines: int = LOG_TAIL_LINES) -> str:
    return "\n".join(text.rstrip().splitlines()[-lines:])


def running_pids() -> list[int]:
    """PIDs of the brokers this process started that still run (for CPU accounting)."""
    return [pid for pid, process in _started.items() if process.poll() is None]

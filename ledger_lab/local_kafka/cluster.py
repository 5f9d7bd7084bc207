"""A real Apache Kafka cluster (KRaft) on loopback, run from the cached jars on local Java.

One node (combined broker+controller) for development and tests, or three (distinct ids,
ports and folders; replication 3, min ISR 2) for fault tests. Everything lives in one
folder: ``cluster.json`` (see :mod:`.state`), ``log4j2.properties`` and ``node-<id>/``
with ``server.properties``, ``broker.log`` and ``data/``. Processes are started in their
own session, so they outlive the command that started them, and are stopped by PID.
"""

from __future__ import annotations

import shutil
import signal
from collections.abc import Callable
from contextlib import AbstractContextManager
from importlib import resources
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

from ledger_lab.local_kafka import node as broker
from ledger_lab.local_kafka import ports as net
from ledger_lab.local_kafka.filelock import exclusive
from ledger_lab.local_kafka.readiness import wait_until_answering
from ledger_lab.local_kafka.server_properties import LocalSasl, NodeSpec, plan_nodes, render
from ledger_lab.local_kafka.state import ClusterState, read_state, write_state
from ledger_lab.local_kafka.status import ClusterStatus, NodeStatus, StopResult
from ledger_lab.local_kafka.toolchain import require_tool
from ledger_stream.kafka.exceptions import BrokerStartError, ClusterStateError

if TYPE_CHECKING:
    from ledger_stream.config import Settings

DEFAULT_START_TIMEOUT_S = 90.0
DEFAULT_STOP_TIMEOUT_S = 30.0
SUPPORTED_SIZES = (1, 3)
LOCK_FILE = ".lock"


class LocalCluster:
    """The local cluster recorded in ``cluster_dir`` (created by :meth:`start`).

    Several objects (and processes) may address one folder: the folder's state file is the
    truth, so ``ledger-stream kafka down`` stops what ``kafka up`` started, and changes to
    it are serialized by a lock file. ``sasl``: a cluster that authenticates every client
    and enforces ACLs (:class:`LocalSasl`); None, the default, is plain and open.
    """

    def __init__(self, cluster_dir: Path, progress: Callable[[str], None] = print,
                 sasl: LocalSasl | None = None) -> None:
        self.cluster_dir = cluster_dir
        self._progress = progress
        self._sasl = sasl

    @classmethod
    def for_settings(
        cls, settings: Settings, progress: Callable[[str], None] = print
    ) -> LocalCluster:
        """The CLI's cluster: ``settings.home / "cluster"``."""
        return cls(settings.home / "cluster", progress)

    def __enter__(self) -> LocalCluster:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def start(
        self,
        libs: Path,
        kafka_version: str,
        nodes: int = 1,
        base_port: int | None = None,
        timeout_s: float = DEFAULT_START_TIMEOUT_S,
    ) -> ClusterStatus:
        """Start ``nodes`` nodes and return once all answer metadata requests.

        ``base_port`` N gives node i the ports N+2(i-1) (broker) and N+2(i-1)+1 (controller);
        without it free ports are picked (the previous ones when still free). A stopped
        cluster in the folder restarts with its data. Raises ToolMissingError, PortInUseError,
        ClusterStateError (a running or different cluster is in the folder) or
        BrokerStartError (with the log tail); on failure every started process is stopped.
        """
        if nodes not in SUPPORTED_SIZES:
            raise ClusterStateError(f"a local cluster has 1 or 3 nodes, not {nodes}")
        java = require_tool("java")
        with self._locked():
            previous = read_state(self.cluster_dir)
            self._check_reusable(previous, nodes, kafka_version)
            specs = plan_nodes(self.cluster_dir, self._ports(previous, nodes, base_port))
            log4j = self._write_configs(specs)
            cluster_id = previous.cluster_id if previous else broker.random_cluster_id(java, libs)
            broker.format_storage(java, libs, specs, cluster_id)
            state = ClusterState(cluster_id, kafka_version, libs, specs, {})
            try:
                for spec in specs:
                    pid = broker.launch(java, libs, spec, _heap(len(specs)), log4j)
                    state = state.with_pids({**state.pids, spec.node_id: pid})
                    write_state(self.cluster_dir, state)  # each PID at once: `down` finds it
                self._wait_ready(state, timeout_s)
            except BaseException:
                self._stop(DEFAULT_STOP_TIMEOUT_S)
                raise
        return self.status()

    def status(self) -> ClusterStatus:
        """What the state file records, with each PID checked against the running processes."""
        state = read_state(self.cluster_dir)
        if state is None:
            return ClusterStatus(self.cluster_dir, None, ())
        rows = []
        for spec in state.nodes:
            pid = state.pids.get(spec.node_id)
            alive = pid is not None and broker.is_alive(pid, spec)
            ports = (spec.broker_port, spec.controller_port)
            rows.append(NodeStatus(spec.node_id, pid, alive, *ports, spec.dir))
        return ClusterStatus(self.cluster_dir, state.bootstrap, tuple(rows))

    def stop(self, timeout_s: float = DEFAULT_STOP_TIMEOUT_S) -> StopResult:
        """SIGTERM every node by PID, SIGKILL those still running after ``timeout_s``.
        Data is kept; :meth:`start` resumes it. Stopping a stopped cluster does nothing."""
        if read_state(self.cluster_dir) is None:
            return StopResult((), ())
        with self._locked():
            return self._stop(timeout_s)

    def wipe(self) -> None:
        """Stop the cluster and delete its folder (topics, offsets, logs)."""
        self.stop()
        shutil.rmtree(self.cluster_dir, ignore_errors=True)

    def kill_node(self, node_id: int, signum: signal.Signals = signal.SIGKILL) -> int | None:
        """Send ``signum`` (default SIGKILL) to one node and wait until it exits (a crash for
        fault tests). Returns its PID, or None when it was not running."""
        with self._locked():
            state = self._require_state()
            spec, pid = state.node(node_id), state.pids.get(node_id)
            if pid is None or not broker.signal_pid(pid, spec, signum):
                return None
            broker.stop({pid: spec}, DEFAULT_STOP_TIMEOUT_S)  # escalates if signum was ignored
            others = {n: p for n, p in state.pids.items() if n != node_id}
            write_state(self.cluster_dir, state.with_pids(others))
            return pid

    def restart_node(self, node_id: int, timeout_s: float = DEFAULT_START_TIMEOUT_S) -> int:
        """Start a stopped node again with its ports and data and return its PID once the
        cluster metadata lists every node. Raises ClusterStateError when the node runs."""
        java = require_tool("java")
        with self._locked():
            state = self._require_state()
            spec, pid = state.node(node_id), state.pids.get(node_id)
            if pid is not None and broker.is_alive(pid, spec):
                raise ClusterStateError(f"node {node_id} still runs (pid {pid})")
            log4j = self.cluster_dir / "log4j2.properties"
            new_pid = broker.launch(java, state.libs, spec, _heap(len(state.nodes)), log4j)
            state = state.with_pids({**state.pids, node_id: new_pid})
            write_state(self.cluster_dir, state)
            self._wait_ready(state, timeout_s)
            return new_pid

    def _locked(self) -> AbstractContextManager[None]:
        return exclusive(self.cluster_dir / LOCK_FILE)

    def _stop(self, timeout_s: float) -> StopResult:
        state = read_state(self.cluster_dir)
        if state is None:
            return StopResult((), ())
        running = {
            pid: state.node(node_id)
            for node_id, pid in state.pids.items()
            if broker.is_alive(pid, state.node(node_id))
        }
        killed = broker.stop(running, timeout_s)
        write_state(self.cluster_dir, state.with_pids({}))
        return StopResult(tuple(running), tuple(killed))

    def _require_state(self) -> ClusterState:
        state = read_state(self.cluster_dir)
        if state is None:
            raise ClusterStateError(f"no local cluster in {self.cluster_dir}")
        return state

    def _check_reusable(self, previous: ClusterState | None, nodes: int, version: str) -> None:
        if previous is None:
            return
        if self.status().running:
            raise ClusterStateError(
                f"a local cluster already runs in {self.cluster_dir} at {previous.bootstrap}"
            )
        if len(previous.nodes) != nodes or previous.kafka_version != version:
            raise ClusterStateError(
                f"{self.cluster_dir} holds a {len(previous.nodes)}-node Kafka "
                f"{previous.kafka_version} cluster, not {nodes}-node {version}: "
                "run `ledger-stream kafka down --wipe` to delete it first"
            )

    def _ports(self, previous: ClusterState | None, nodes: int, base_port: int | None) -> list[int]:
        if base_port is not None:
            wanted = list(range(base_port, base_port + 2 * nodes))
            net.require_free(wanted)
            return wanted
        if previous is not None:
            earlier = [p for n in previous.nodes for p in (n.broker_port, n.controller_port)]
            if all(net.port_is_free(p) for p in earlier):
                return earlier
        return net.pick_free_ports(2 * nodes)

    def _write_configs(self, specs: tuple[NodeSpec, ...]) -> Path:
        for spec in specs:
            spec.dir.mkdir(parents=True, exist_ok=True)
            spec.properties_path.write_text(render(spec, specs, self._sasl))
        log4j = self.cluster_dir / "log4j2.properties"
        package = resources.files("ledger_lab.local_kafka")
        log4j.write_text(package.joinpath("log4j2.properties").read_text())
        return log4j

    def _wait_ready(self, state: ClusterState, timeout_s: float) -> None:
        def check_processes() -> None:
            for node_id, pid in state.pids.items():
                spec = state.node(node_id)
                if not broker.is_alive(pid, spec):
                    raise BrokerStartError(
                        f"Kafka node {node_id} (pid {pid}) exited while starting; "
                        f"log: {spec.log_path}",
                        broker.log_tail(spec),
                    )

        ports = [spec.broker_port for spec in state.nodes]
        try:
            waited = wait_until_answering(state.bootstrap, ports, timeout_s, check_processes,
                                          self._sasl.client() if self._sasl else {})
        except TimeoutError as exc:
            first = state.nodes[0]
            raise BrokerStartError(
                f"Kafka at {state.bootstrap} did not answer within {timeout_s:.0f} s ({exc}); "
                f"log: {first.log_path}",
                broker.log_tail(first),
            ) from exc
        self._progress(f"Kafka answered after {waited:.1f} s")


def _heap(cluster_size: int) -> tuple[str, ...]:
    return broker.HEAP_ONE_NODE if cluster_size == 1 else broker.HEAP_PER_NODE_IN_CLUSTER

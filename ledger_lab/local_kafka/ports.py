"""Loopback ports for local brokers: picked free by the OS, or checked when configured."""

from __future__ import annotations

import socket
from contextlib import ExitStack

from ledger_stream.kafka.exceptions import PortInUseError

HOST = "127.0.0.1"


def port_is_free(port: int, host: str = HOST) -> bool:
    """True when nothing listens on ``host:port`` and it can be bound right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


def require_free(ports: list[int], host: str = HOST) -> None:
    """Raise PortInUseError naming every port in ``ports`` that is taken."""
    taken = [port for port in ports if not port_is_free(port, host)]
    if taken:
        listed = ", ".join(str(p) for p in taken)
        raise PortInUseError(
            f"port {listed} on {host} is already in use: choose another --port, "
            "or omit it to pick free ports"
        )


def pick_free_ports(count: int, host: str = HOST) -> list[int]:
    """``count`` distinct ports the OS reports free. Another process may still take one
    before the broker binds it; the broker then fails to start and says so in its log."""
    with ExitStack() as stack:
        ports = []
        for _ in range(count):
            sock = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            sock.bind((host, 0))
            ports.append(sock.getsockname()[1])
    return ports


def can_connect(port: int, host: str = HOST, timeout_s: float = 0.5) -> bool:
    """True when something accepts TCP connections on ``host:port``."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError:
        return False

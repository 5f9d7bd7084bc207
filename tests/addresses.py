"""This host's addresses, for tests of what a server answers beyond loopback."""

from __future__ import annotations

import socket

import pytest


def outward_address() -> str:
    """An address of this host that is not loopback (skip when it has none). The UDP
    connect is a route lookup: no packet is sent."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("10.255.255.255", 9))
        except OSError:
            pytest.skip("this host has no address beyond loopback")
        address: str = probe.getsockname()[0]
    if address.startswith("127."):
        pytest.skip("this host has no address beyond loopback")
    return address

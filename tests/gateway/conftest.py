"""The gateway as a process on the test stack (broker, processor, HTTP connector, sandbox),
and a curl client: nothing but HTTP."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ledger_lab.harness.sandbox import SandboxProc
from ledger_lab.harness.stack import Stack
from ledger_stream.config import Settings
from tests.gateway.support import (
    serve_gateway,
)


@pytest.fixture
def gateway(stack: Stack, sandbox: SandboxProc, tmp_path: Path) -> Iterator[str]:
    """The gateway on the whole stack: processor, HTTP connector, payments sandbox."""
    stack.connector("http", "--name", "payments", "--base-url", sandbox.url, "--deduplicates")
    yield from serve_gateway(stack.settings, tmp_path)


@pytest.fixture
def bare_gateway(ledger_topics: Settings, tmp_path: Path) -> Iterator[str]:
    """The gateway on the ledger topics alone: for what it answers without a processor."""
    yield from serve_gateway(ledger_topics, tmp_path)









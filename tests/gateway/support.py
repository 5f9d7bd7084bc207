"""The gateway as a process on the test stack and a curl client: the API keys, helpers and
requests the gateway tests share (a fixtures module: it holds no tests)."""

from __future__ import annotations

import json
import queue
import subprocess
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ledger_lab.harness.processes import Proc, processor_group
from ledger_lab.local_kafka.ports import pick_free_ports
from ledger_stream.config import Settings
from ledger_stream.sdk.receipt_hub import ReceiptHub

# Operator keys (ops-ann of acme, ops-eve of globex): they submit too.
ACME, GLOBEX = "acme-key-0123456789abcdef", "globex-key-0123456789abcdef"


ACME_AGENT, ACME_UNNAMED = "acme-agent-0123456789abcdef", "acme-unnamed-0123456789abcdef"


def serve_gateway(settings: Settings, tmp_path: Path, *extra: str,
                  env: dict[str, str] | None = None) -> Iterator[str]:
    assert settings.kafka_bootstrap
    keys = tmp_path / "keys"
    keys.write_text(f"# tenant:role=key\nacme:operator:ops-ann={ACME}\n"
                    f"globex:operator:ops-eve={GLOBEX}\nacme:agent={ACME_AGENT}\n"
                    f"acme={ACME_UNNAMED}\n")
    (port,) = pick_free_ports(1)
    proc = Proc(["api", "--port", str(port), "--keys-file", str(keys), "--bootstrap",
                 settings.kafka_bootstrap, "--topic-prefix", settings.topic_prefix, *extra],
                tmp_path / "api.log", env={"LEDGER_CONSUMER_GROUP": processor_group(settings),
                                           **(env or {})})
    url = f"http://127.0.0.1:{port}"
    proc.wait_healthy(url)
    yield url
    assert proc.stop() == 0, proc.tail()


def curl(method: str, url: str, key: str | None = None, body: Any = None,
         headers: dict[str, str] | None = None) -> tuple[int, Any]:
    """(HTTP status, JSON body) of one curl call."""
    command = ["curl", "-sS", "-X", method, "-w", "\n%{http_code}", url]
    if key is not None:
        command += ["-H", f"Authorization: Bearer {key}"]
    for name, value in (headers or {}).items():
        command += ["-H", f"{name}: {value}"]
    if body is not None:
        command += ["-H", "Content-Type: application/json", "--data", json.dumps(body)]
    out = subprocess.run(command, capture_output=True, text=True, timeout=120, check=True)
    text, _, code = out.stdout.rpartition("\n")
    return int(code), json.loads(text) if text else None


def intent(key: str, amount: int = 4200, wait: float = 30) -> dict[str, Any]:
    return {"key": key, "action": "refund", "target": "payments",
            "args": {"amount": amount, "currency": "EUR"},
            "workflow": {"graph": "billing-bot", "version": "3.1", "thread_id": "t-9"},
            "wait_seconds": wait}


def new_key(tenant: str = "acme") -> str:
    return f"{tenant}/refund/{uuid.uuid4().hex[:10]}"


class RegisteringHub(ReceiptHub):
    """The hub's registration (``_register``) without a consumer or thread."""

    def __init__(self) -> None:
        self._topic = "ledger.receipts"
        self._partition_of = lambda key: 0
        self._end_offset = lambda partition, patience_s: 0
        self._to_assign: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._waiters = {}
        self._assigned = set()
        self._log_end = {}
        self._lock = threading.Lock()
        self._assign_lock = threading.Lock()
        self._closed = threading.Event()
        self._wanted = threading.Event()

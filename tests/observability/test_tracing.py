"""The ledger's hops in one OpenTelemetry trace, checked with the in-memory exporter: an
agent's span, the SDK's submit, the processor (a real process: it passes the context
through), the connector's call (in this process, so its spans are exported here too) with
``traceparent`` sent to the target, and the receipt carrying the call's context back."""

from __future__ import annotations

import http.server
import json
import queue
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from connectors.http import HttpTarget
from ledger_lab.harness.stack import Stack
from ledger_stream import LedgerClient
from ledger_stream.connector.commands import Call
from ledger_stream.connector.memory import MemoryTarget
from ledger_stream.connector.options import ConnectorOptions
from ledger_stream.connector.runtime import ConnectorWorker
from ledger_stream.connector.target import EffectRequest
from ledger_stream.domain import events as ev

pytestmark = pytest.mark.timeout(120)

_EXPORTER = InMemorySpanExporter()


@pytest.fixture(scope="module")
def spans() -> InMemorySpanExporter:
    """The process's tracer provider (set once: OpenTelemetry allows one per process)."""
    if not isinstance(trace.get_tracer_provider(), TracerProvider):
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(_EXPORTER))
        trace.set_tracer_provider(provider)
    return _EXPORTER


class Payments(http.server.BaseHTTPRequestHandler):
    """A payments API that keeps the headers of every call."""

    calls: list[dict[str, str]] = []

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        Payments.calls.append(dict(self.headers.items()))
        body = json.dumps({"id": f"pay-{len(Payments.calls)}"}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def payments() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Payments)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_one_trace_from_the_agent_to_the_target_and_back(stack: Stack, payments: str, spans):
    spans.clear()
    worker = ConnectorWorker(stack.settings, stack.bootstrap,
                             HttpTarget("payments", payments, deduplicates=True),
                             ConnectorOptions(lease_ms=10_000, call_timeout_s=5))
    stop = threading.Event()
    running = threading.Thread(target=worker.run, args=(stop,), daemon=True)
    running.start()
    key = f"acme/refund/inv-{uuid.uuid4().hex[:8]}"
    try:
        with LedgerClient(stack.settings) as client:
            tracer = trace.get_tracer("agent")
            with tracer.start_as_current_span("agent.tool issue_refund") as agent:
                intent = client.intent(key, "refund", "payments", {"amount": 5},
                                       workflow=ev.Workflow("g", "1", "t", "tools"))
                receipt = client.submit(intent, 60)
    finally:
        stop.set()
        running.join(30)
    assert receipt.status is ev.ReceiptStatus.SUCCEEDED
    by_name = {s.name: s for s in spans.get_finished_spans()}
    submit, apply = by_name["ledger.submit refund"], by_name["ledger.apply payments"]
    trace_id = agent.get_span_context().trace_id
    # One trace: the agent's span, its submit, and the connector's call under the submit.
    assert submit.context.trace_id == apply.context.trace_id == trace_id
    assert submit.parent.span_id == agent.get_span_context().span_id
    assert apply.parent.span_id == submit.context.span_id  # through the processor
    assert apply.attributes["ledger.operation_key"] == key
    assert apply.attributes["ledger.outcome"] == "succeeded"
    assert "amount" not in json.dumps(dict(submit.attributes)) + json.dumps(
        dict(apply.attributes))  # ids and hashes, never arguments
    # The target got the call's context.
    (call,) = [c for c in Payments.calls if c.get("Idempotency-Key") == key]
    assert call["traceparent"].split("-")[1:3] == [f"{trace_id:032x}",
                                                   f"{apply.context.span_id:016x}"]
    # The receipt came back with the call's context: the submit span links it.
    assert submit.attributes["ledger.receipt.status"] == "succeeded"
    assert [link.context.span_id for link in submit.links] == [apply.context.span_id]


PAN = "4111 1111 1111 1111"


class DecliningTarget(MemoryTarget):
    """A target whose client library quotes the decline (a card number), and whose
    ``classify`` has a bug: the call's exception leaves the call's span."""

    def apply(self, request: EffectRequest, timeout_s: float) -> str:
        raise ValueError(f"HTTP 402: card {PAN} declined")

    def classify(self, error: Exception) -> ev.OutcomeStatus:
        raise KeyError(f"no outcome for {error}")  # quotes it, as a bug's message may


def test_an_exception_leaving_a_span_is_traced_as_its_class_only(spans):
    """A span an exception leaves records its class, never its message or traceback: they
    (or a cause's) may quote the target's answer (``connector/redaction.py``)."""
    spans.clear()
    worker = ConnectorWorker.__new__(ConnectorWorker)  # the call thread's parts, no Kafka
    worker._target, worker._done = DecliningTarget(), queue.SimpleQueue()
    worker._lock, worker._loop_thread = threading.RLock(), threading.get_ident()
    worker._traces, worker._traces_lock = {}, threading.Lock()
    worker._core = type("Core", (), {"called": staticmethod(lambda *_: [])})()
    worker._call(Call(1, EffectRequest("acme/pay/k1", 1, "c1", "pay", {}, "h"), 2.0, 0))
    (apply,) = [s for s in spans.get_finished_spans() if s.name == "ledger.apply memory"]
    exported = json.loads(apply.to_json())
    assert "4111" not in json.dumps(exported), exported
    assert apply.status.status_code is StatusCode.ERROR
    assert apply.status.description == "KeyError"

"""OpenTelemetry tracing of the ledger's hops: the agent's submit, the connector's call to
the target, and the receipt back, in one trace.

The W3C trace context (``traceparent``, ``tracestate``) travels in Kafka record headers:

- ``LedgerClient.submit`` opens a ``ledger.submit`` span (a child of whatever span the agent
  is in: a LangGraph tool, a LangSmith run) and puts its context on the intent;
- the processor copies an input record's trace headers onto every record it produces from
  that record (dispatch, receipts, alerts): pure pass-through, so outputs stay the same
  bytes on a replay (a dispatch a timer sends later carries none);
- the connector opens ``ledger.apply <target>`` under the dispatch's context around the
  target call, sends that context to an HTTP target (``traceparent``), and puts it on the
  claim and the outcome, hence on the receipt;
- the submit span links the context the answering receipt carries.

Off unless configured: spans go to the process's global TracerProvider, which is a no-op
until an application sets one (an agent that already exports to LangSmith or OTLP gets the
ledger's spans in its traces). A ledger process exports with ``LEDGER_TRACING=otlp`` (the
``tracing`` extra; the OTLP exporter reads the standard ``OTEL_EXPORTER_OTLP_*`` variables).
Without the ``opentelemetry`` packages every function here does nothing. Span attributes
are ids and hashes (operation key, intent event id, attempt id, args hash), never
arguments.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

logger = logging.getLogger(__name__)

TRACE_HEADERS = ("traceparent", "tracestate")
Headers = tuple[tuple[str, bytes], ...]

try:
    from opentelemetry import trace
    from opentelemetry.trace import SpanKind, Status, StatusCode
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    _PROPAGATOR: Any = TraceContextTextMapPropagator()
except ImportError:  # pragma: no cover - the tracing packages are optional
    trace = None  # type: ignore[assignment]
    _PROPAGATOR = None


def carried(raw: Mapping[str, Any] | Sequence[tuple[str, Any]] | None) -> Headers:
    """The trace headers among a Kafka record's headers (``msg.headers()``), as bytes."""
    if not raw:
        return ()
    items = raw.items() if isinstance(raw, Mapping) else raw
    return tuple((name, value if isinstance(value, bytes) else str(value).encode())
                 for name, value in items if name in TRACE_HEADERS and value is not None)


def current_headers() -> Headers:
    """The current span's context as Kafka headers (empty without a recording span)."""
    if _PROPAGATOR is None:
        return ()
    carrier: dict[str, str] = {}
    _PROPAGATOR.inject(carrier)
    return tuple((name, value.encode()) for name, value in carrier.items())


def http_headers() -> dict[str, str]:
    """The current span's context as HTTP headers, for a call to a target."""
    if _PROPAGATOR is None:
        return {}
    carrier: dict[str, str] = {}
    _PROPAGATOR.inject(carrier)
    return carrier


def _context(headers: Headers | Mapping[str, str]) -> Any:
    if _PROPAGATOR is None or not headers:
        return None
    items = headers.items() if isinstance(headers, Mapping) else headers
    carrier = {name: value.decode("latin-1") if isinstance(value, bytes) else value
               for name, value in items}
    return _PROPAGATOR.extract(carrier)


@contextmanager
def span(name: str, *, parent: Headers = (), kind: str = "internal",
         attributes: Mapping[str, Any] | None = None) -> Iterator[Any]:
    """A span, current inside the block: a child of ``parent`` (trace headers) when given,
    else of the current span. Yields None when tracing is not installed."""
    if trace is None:
        yield None
        return
    kinds = {"producer": SpanKind.PRODUCER, "consumer": SpanKind.CONSUMER,
             "client": SpanKind.CLIENT, "internal": SpanKind.INTERNAL}
    tracer = trace.get_tracer("ledger_stream")
    with tracer.start_as_current_span(name, context=_context(parent), kind=kinds[kind],
                                      attributes=dict(attributes or {})) as current:
        yield current


def link(current: Any, headers: Headers, **attributes: Any) -> None:
    """Link the context in ``headers`` (a receipt's) to the span ``current``."""
    if current is None or trace is None or not headers:
        return
    linked = trace.get_current_span(_context(headers)).get_span_context()
    if linked.is_valid:
        current.add_link(linked, attributes)


def failed(current: Any, why: str) -> None:
    """Mark ``current`` as failed (an effect refused, an outcome unknown)."""
    if current is not None and trace is not None:
        current.set_status(Status(StatusCode.ERROR, why))


def configure(mode: str) -> None:
    """Export this process's spans: ``otlp`` (``OTEL_EXPORTER_OTLP_*``) or ``off``."""
    if mode == "off":
        return
    if mode != "otlp":
        raise ValueError(f"LEDGER_TRACING must be off or otlp, not {mode!r}")
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError as exc:
        raise RuntimeError("LEDGER_TRACING=otlp needs the tracing extra: pip install "
                           "'ledger-stream[tracing]'") from exc
    provider = TracerProvider(resource=Resource.create({"service.name": "ledger-stream"}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    logger.info("tracing to OTLP")


__all__ = ["carried", "configure", "current_headers", "failed", "http_headers",
           "link", "span"]

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
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

logger = logging.getLogger(__name__)

TRACE_HEADERS = ("traceparent", "tracestate")
Headers = tuple[tuple[str, bytes], ...]
# W3C trace context: what is passed on is checked, so a careless producer's headers never
# grow or break the records built from its own.
_TRACEPARENT = re.compile(rb"[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}")
TRACESTATE_LIMIT = 512

try:
    from opentelemetry import trace
    from opentelemetry.trace import SpanKind, Status, StatusCode
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    _PROPAGATOR: Any = TraceContextTextMapPropagator()
except ImportError:  # pragma: no cover - the tracing packages are optional
    trace = None  # type: ignore[assignment]
    _PROPAGATOR = None


def carried(raw: Mapping[str, Any] | Sequence[tuple[str, Any]] | None) -> Headers:
    """The trace context among a Kafka record's headers (``msg.headers()``): one valid
    ``traceparent``, and with it one ``tracestate`` of at most 512 bytes; () otherwise."""
    if not raw:
        return ()
    items = raw.items() if isinstance(raw, Mapping) else raw
    found: dict[str, bytes] = {}
    for name, value in items:
        if name not in TRACE_HEADERS or name in found or value is None:
            continue
        data = value if isinstance(value, bytes) else str(value).encode()
        if name == "traceparent" and _TRACEPARENT.fullmatch(data) is None:
            return ()  # not a trace context: pass nothing on
        if name == "tracestate" and (len(data) > TRACESTATE_LIMIT or not data.isascii()):
            continue
        found[name] = data
    if "traceparent" not in found:
        return ()
    return tuple((name, found[name]) for name in TRACE_HEADERS if name in found)


def of_message(msg: Any) -> Headers:
    """The trace context of a consumed record; () when its headers cannot be read (a header
    name that is not UTF-8 makes confluent-kafka raise): a record's headers never stop the
    reader of its value."""
    try:
        return carried(msg.headers())
    except Exception:  # noqa: BLE001 - SystemError, UnicodeDecodeError, ...
        return ()


def current_headers() -> Headers:
    """The current span's context as Kafka headers (empty without a recording span)."""
    if _PROPAGATOR is None:
        return ()
    carrier: dict[str, str] = {}
    _PROPAGATOR.inject(carrier)
    return tuple((name, value.encode()) for name, value in carrier.items())


def http_headers() -> dict[str, str]:
    """The current span's ``traceparent`` as an HTTP header, for a call to a target (never
    ``tracestate``: the agent's vendor state is not a third party's business)."""
    if _PROPAGATOR is None:
        return {}
    carrier: dict[str, str] = {}
    _PROPAGATOR.inject(carrier)
    return {"traceparent": carrier["traceparent"]} if "traceparent" in carrier else {}


def current_trace_id() -> str:
    """The current span's trace id (32 hex digits), or "" without a recording span."""
    if trace is None:
        return ""
    context = trace.get_current_span().get_span_context()
    return format(context.trace_id, "032x") if context.is_valid else ""


def _context(headers: Headers | Mapping[str, str]) -> Any:
    if _PROPAGATOR is None or not headers:
        return None
    items = headers.items() if isinstance(headers, Mapping) else headers
    carrier = {name: value.decode("latin-1") if isinstance(value, bytes) else value
               for name, value in items}
    return _PROPAGATOR.extract(carrier)


def installed() -> bool:
    """Whether spans are recorded: an application or ``LEDGER_TRACING`` set a tracer
    provider. Until then every span is a no-op that only passes its parent's context on."""
    return trace is not None and not isinstance(trace.get_tracer_provider(),
                                                trace.ProxyTracerProvider)


@contextmanager
def span(name: str, *, parent: Headers = (), kind: str = "internal",
         attributes: Mapping[str, Any] | None = None) -> Iterator[Any]:
    """A span, current inside the block: a child of ``parent`` (trace headers) when given,
    else of the current span. Yields None when tracing is not installed.

    An exception leaving the block marks the span failed with its class only: OpenTelemetry
    would record its message and traceback, whose chained causes can quote a target's
    answer (a connector's call) or an argument."""
    if trace is None:
        yield None
        return
    kinds = {"producer": SpanKind.PRODUCER, "consumer": SpanKind.CONSUMER,
             "client": SpanKind.CLIENT, "internal": SpanKind.INTERNAL}
    tracer = trace.get_tracer("ledger_stream")
    with tracer.start_as_current_span(name, context=_context(parent), kind=kinds[kind],
                                      attributes=dict(attributes or {}),
                                      record_exception=False,
                                      set_status_on_exception=False) as current:
        try:
            yield current
        except BaseException as exc:
            failed(current, type(exc).__name__)
            raise


def link(current: Any, headers: Headers, **attributes: Any) -> None:
    """Link the context in ``headers`` (a receipt's) to the span ``current``. Never raises:
    tracing must not fail the work it describes."""
    if current is None or trace is None or not headers:
        return
    try:
        linked = trace.get_current_span(_context(headers)).get_span_context()
        if linked.is_valid:
            current.add_link(linked, attributes)
    except Exception as exc:  # noqa: BLE001 - an old opentelemetry-api, a broken provider
        logger.debug("span link failed", extra={"error": str(exc)})


def annotate(current: Any, **attributes: Any) -> None:
    """Set attributes on ``current`` (ids and hashes only); never raises."""
    if current is None:
        return
    try:
        for name, value in attributes.items():
            current.set_attribute(name, value)
    except Exception as exc:  # noqa: BLE001
        logger.debug("span attributes failed", extra={"error": str(exc)})


def failed(current: Any, why: str) -> None:
    """Mark ``current`` as failed: ``why`` is a status and an error class, never a
    target's reply (which may echo arguments). Never raises."""
    if current is None or trace is None:
        return
    try:
        current.set_status(Status(StatusCode.ERROR, why))
    except Exception as exc:  # noqa: BLE001
        logger.debug("span status failed", extra={"error": str(exc)})


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


__all__ = ["annotate", "carried", "configure", "current_headers", "failed", "http_headers",
           "link", "of_message", "span"]

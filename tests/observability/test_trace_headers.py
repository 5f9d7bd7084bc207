"""Trace headers as the ledger reads them from other people's records, without a broker:
only one well-formed W3C context is passed on, and headers that cannot be read never stop
the processor from deciding the record (tracing.py)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ledger_stream import tracing
from ledger_stream.domain.policy import Policy
from ledger_stream.processor.batch import Batch
from ledger_stream.processor.changelog import Positions
from ledger_stream.state import MemoryPartitionStore
from tests.factories import intent
from tests.processor.fakes import ATTEMPTS, CODEC, INTENTS, PARTITIONS, make_step, record_of

pytestmark = pytest.mark.timeout(30)

PARENT = b"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


@pytest.mark.parametrize("headers, kept", [
    ([("traceparent", PARENT)], [("traceparent", PARENT)]),
    ([("traceparent", PARENT), ("tracestate", b"v=1"), ("x-other", b"secret")],
     [("traceparent", PARENT), ("tracestate", b"v=1")]),
    ([("traceparent", b"not a trace context")], []),
    ([("traceparent", PARENT + b"0" * 10_000)], []),
    ([("tracestate", b"v=1")], []),  # no parent: nothing to pass on
    ([("traceparent", PARENT), ("tracestate", b"x" * 600)], [("traceparent", PARENT)]),
    ([("traceparent", PARENT), ("traceparent", b"00-" + b"1" * 32 + b"-" + b"2" * 16 + b"-01")],
     [("traceparent", PARENT)]),  # the first one only
    ([("traceparent", PARENT.decode())], [("traceparent", PARENT)]),
    (None, []),
])
def test_only_one_well_formed_context_is_carried(headers, kept):
    assert list(tracing.carried(headers)) == kept


class Unreadable:
    """A record whose header names are not UTF-8: confluent-kafka raises on headers()."""

    def __init__(self, inner) -> None:
        self._inner = inner

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def headers(self):
        raise SystemError("<built-in method headers> returned a result with an exception set")


def test_a_record_whose_headers_cannot_be_read_is_still_decided():
    stores = {p: MemoryPartitionStore(p) for p in range(PARTITIONS)}
    batch = Batch(make_step(Policy()), stores, dict.fromkeys(stores, Positions()),
                  (INTENTS, ATTEMPTS))
    batch.add(Unreadable(record_of(intent(key="acme/pay/k1"), INTENTS, 0, 1_000)))
    traced = replace(record_of(intent(key="acme/pay/k2"), INTENTS, 1, 1_001),
                     _headers=[("traceparent", PARENT)])
    batch.add(traced)
    outs = [(CODEC.decode(o.value).key, o.headers) for o in batch.outputs]
    assert ("acme/pay/k1", ()) in outs  # decided, without a trace
    assert ("acme/pay/k2", (("traceparent", PARENT),)) in outs  # the context passed on

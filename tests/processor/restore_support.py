"""The restore tests' consumer group and state samples, shared with the Kafka restore tests (a
fixtures module: it holds no tests)."""

from __future__ import annotations

from ledger_stream.domain import decide
from ledger_stream.domain.policy import Policy
from ledger_stream.domain.state import absent
from ledger_stream.state import (
    encode_row,
)
from tests.factories import claim, intent

POLICY = Policy()


GROUP = "ledger-processor"


def _states() -> tuple[bytes, bytes]:
    """Key A reserved, then granted: two rows of one key."""
    event = intent(key="acme/pay/A", at_ms=1_000)
    reserved = decide(absent(event.key), event, POLICY, 1_000).state
    granted = decide(reserved, claim(key=event.key, at_ms=2_000), POLICY, 2_000).state
    return encode_row(reserved), encode_row(granted)

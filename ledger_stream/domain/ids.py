"""Deterministic ids of the processor's outputs.

Each id is a hash of the facts that make the output unique, so reprocessing an input after a
crash reproduces the same id (and the same bytes), and consumers can deduplicate by id: the
first 32 hex digits of the SHA-256 of the kind and the facts, joined by ``\\x1f``.
"""

from __future__ import annotations

import hashlib


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


# Each id's text is written out (no join over a generator): two ids per fresh decision.
def dispatch_id(key: str, intent_event_id: str, attempt: int) -> str:
    return _digest(f"dispatch\x1f{key}\x1f{intent_event_id}\x1f{attempt}")


def receipt_id(key: str, answering_event_id: str, attempt: int, status: str) -> str:
    return _digest(f"receipt\x1f{key}\x1f{answering_event_id}\x1f{attempt}\x1f{status}")


def alert_id(key: str, kind: str, source_event_id: str) -> str:
    return _digest(f"alert\x1f{key}\x1f{kind}\x1f{source_event_id}")

"""Deterministic ids of the processor's outputs.

Each id is a hash of the facts that make the output unique, so reprocessing an input after a
crash reproduces the same id (and the same bytes), and consumers can deduplicate by id.
"""

from __future__ import annotations

import hashlib


def _digest(kind: str, *parts: str | int) -> str:
    text = "\x1f".join((kind, *(str(p) for p in parts)))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def dispatch_id(key: str, intent_event_id: str, attempt: int) -> str:
    return _digest("dispatch", key, intent_event_id, attempt)


def receipt_id(key: str, answering_event_id: str, attempt: int, status: str) -> str:
    return _digest("receipt", key, answering_event_id, attempt, status)


def alert_id(key: str, kind: str, source_event_id: str) -> str:
    return _digest("alert", key, kind, source_event_id)

"""Typed access to a consumed record's position.

The client types ``topic()``, ``partition()`` and ``offset()`` as optional because a message
it builds to carry an error has none; a record read from a partition always has all three."""

from __future__ import annotations

from confluent_kafka import Consumer, Message


def position(msg: Message) -> tuple[str, int, int]:
    """(topic, partition, offset) of a consumed record; ValueError for an error message."""
    topic, partition, offset = msg.topic(), msg.partition(), msg.offset()
    if topic is None or partition is None or offset is None:
        raise ValueError(f"a message without a position (error: {msg.error()})")
    return topic, partition, offset


def error_text(msg: Message) -> str:
    """The message's error as text ('' when it carries none)."""
    err = msg.error()
    return err.str() if err is not None else ""


def fetched(consumer: Consumer, max_records: int, timeout_s: float) -> list[Message]:
    """Waits up to ``timeout_s`` for the first record, then takes what the client has already
    fetched, up to ``max_records``. Never waits for a batch to fill, as ``consume(n, t)`` does
    (it returns only at ``n`` records or at ``t``)."""
    first = consumer.poll(timeout_s)
    if first is None:
        return []
    return [first, *consumer.consume(max_records - 1, timeout=0)] if max_records > 1 else [first]

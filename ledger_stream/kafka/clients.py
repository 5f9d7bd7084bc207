"""The Kafka clients every part of the ledger uses: confluent-kafka's, except that an error
raised while callbacks are served comes out as itself, never as a SystemError.

confluent-kafka serves librdkafka's callbacks (delivery reports, rebalances, errors and, with
``client_config.CLIENT_CONFIG``, every log line) inside ``poll``, ``consume``, ``flush`` and
the transactional calls. A callback that raises, and a fatal error (a transactional producer
fenced by a newer instance, for one), leave the exception set and ask the dispatcher to stop;
but a log line already queued behind it is still handed to our logger, which then runs with
the exception set, and Python raises ``SystemError: <class 'logging.LogRecord'> returned a
result with an exception set``, the real exception as its cause. Code waiting for
``KafkaException`` never saw it: the processor ended with a traceback instead of replacing its
fenced producer (a CI run of tests/reliability/test_min_isr.py, 2026-12-03). Here every call
that serves callbacks raises that cause instead (``WRAPPED``; ``tests/kafka/test_clients.py``
checks that no other module builds a plain client).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any, TypeVar

import confluent_kafka
from confluent_kafka import KafkaError, KafkaException

F = TypeVar("F", bound=Callable[..., Any])


def unmasked(exc: SystemError) -> KafkaException:
    """The KafkaException a callback-serving call really raised.

    Its cause when that is one (the fatal error set by confluent-kafka's error callback).
    Otherwise the client is in a state its own C code did not expect (on Python 3.13 the
    logger can even clear the pending error: "returned NULL without setting an exception"),
    and it counts as a fatal error of that client: a new one must take over."""
    if isinstance(exc.__cause__, KafkaException):
        return exc.__cause__
    return KafkaException(KafkaError(KafkaError._FATAL, f"the Kafka client failed: {exc}",
                                     fatal=True))


def _unmasking(call: F) -> F:
    @wraps(call)
    def serving(*args: Any, **kwargs: Any) -> Any:
        try:
            return call(*args, **kwargs)
        except SystemError as exc:
            real = unmasked(exc)
            real.add_note(f"raised inside the client as {exc!r}")
            raise real from None
    return serving  # type: ignore[return-value]


WRAPPED = {"Producer": ("poll", "flush", "init_transactions", "begin_transaction",
                        "send_offsets_to_transaction", "commit_transaction",
                        "abort_transaction", "purge", "close"),
           "Consumer": ("poll", "consume", "commit", "close")}


class Producer(confluent_kafka.Producer):
    """confluent_kafka.Producer, raising what its callbacks raised (see the module)."""

    poll = _unmasking(confluent_kafka.Producer.poll)
    flush = _unmasking(confluent_kafka.Producer.flush)
    init_transactions = _unmasking(confluent_kafka.Producer.init_transactions)
    begin_transaction = _unmasking(confluent_kafka.Producer.begin_transaction)
    send_offsets_to_transaction = _unmasking(
        confluent_kafka.Producer.send_offsets_to_transaction)
    commit_transaction = _unmasking(confluent_kafka.Producer.commit_transaction)
    abort_transaction = _unmasking(confluent_kafka.Producer.abort_transaction)
    purge = _unmasking(confluent_kafka.Producer.purge)
    close = _unmasking(confluent_kafka.Producer.close)


class Consumer(confluent_kafka.Consumer):
    """confluent_kafka.Consumer, raising what its callbacks raised (see the module)."""

    poll = _unmasking(confluent_kafka.Consumer.poll)
    consume = _unmasking(confluent_kafka.Consumer.consume)
    commit = _unmasking(confluent_kafka.Consumer.commit)
    close = _unmasking(confluent_kafka.Consumer.close)

"""The stream processor: the single writer per operation key.

A consume → decide → produce loop on confluent-kafka with one RocksDB store per partition
(``ledger_stream.state``), backed by the ``<prefix>.changelog`` topic. ``runtime`` runs the
loop, ``checkpoint`` makes each batch durable in a crash-safe order, ``restore`` catches a
store up from the changelog, ``step`` decides one record (no Kafka). See docs/processor.md.
"""

from ledger_stream.processor.exceptions import ProcessorError, StartupRefused
from ledger_stream.processor.runtime import Processor, run_processor

__all__ = ["Processor", "ProcessorError", "StartupRefused", "run_processor"]

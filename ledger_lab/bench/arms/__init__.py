"""The benchmark's arms. Each has a ``name``, says whether it is ``repeated`` (interleaved
with the others) and ``run(ctx, repetition)`` returns an :class:`ArmResult`.

Throughput: ``bytes-echo`` and ``avro-echo`` (raw_echo), ``ledger-alo`` and ``ledger-eos``
(ledger), ``pg-naive`` and ``pg-tuned`` (postgres). Once each: ``latency``, ``growth``,
``restore``, ``peers`` (ledger-stream beside the peer libraries, with its own interleaved
repetitions). Arms that measure a process run it as a child, so its peak RSS is its own.
"""

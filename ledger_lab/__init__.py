"""The lab around ledger-stream: benchmarks, chaos soak, falsification matrix, fuzzing,
deterministic simulation, the payments sandbox, the demo, the local Kafka launcher and
process harnesses. The product (ledger_stream) never imports it."""

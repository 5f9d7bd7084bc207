"""The benchmark's arms by name, in the order they run: apart from the options (pydantic),
so that ``ledger-stream bench --help`` can list them without loading those."""

ARM_NAMES = ("bytes-echo", "avro-echo", "io-floor", "ledger", "pg-naive", "pg-tuned",
             "latency", "growth", "restore", "scale-out", "sdk", "connector", "peers")

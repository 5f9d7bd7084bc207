"""The benchmark (``ledger-stream bench``; docs/design.md, 'How performance is measured'):
the ledger's decisions/s and latency side by side with raw Kafka echoes and a PostgreSQL
claim loop, on one broker and one pre-generated workload, as ratios.

The arms live in :mod:`.arms`; :mod:`.runner` interleaves them and :mod:`.report` turns their
figures into JSON and a table.
"""

from ledger_lab.bench.exceptions import BenchError
from ledger_lab.bench.options import ARM_NAMES, BenchOptions

__all__ = ["ARM_NAMES", "BenchError", "BenchOptions"]

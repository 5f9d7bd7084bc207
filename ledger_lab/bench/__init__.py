"""The benchmark (``ledger-stream bench``; docs/design.md, 'How performance is measured'):
the ledger's decisions/s and latency side by side with raw Kafka echoes and a PostgreSQL
claim loop, on one broker and one pre-generated workload, as ratios.

The arms live in :mod:`.arms`; :mod:`.runner` interleaves them and :mod:`.report` turns their
figures into JSON and a table.
"""

from typing import TYPE_CHECKING

from ledger_lab.bench.arm_names import ARM_NAMES
from ledger_lab.bench.exceptions import BenchError

if TYPE_CHECKING:
    from ledger_lab.bench.options import BenchOptions

__all__ = ["ARM_NAMES", "BenchError", "BenchOptions"]

if not TYPE_CHECKING:  # BenchOptions loads pydantic: on first use, not for `bench --help`

    def __getattr__(name: str) -> object:
        if name != "BenchOptions":
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        from ledger_lab.bench.options import BenchOptions

        return BenchOptions

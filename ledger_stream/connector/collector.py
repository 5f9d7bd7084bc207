"""The connector's garbage collection, tuned as the processor's is
(``ledger_stream/processor/collector.py``): its loop allocates a few hundred short-lived
objects per dispatch (records, commands, requests, closures), few of them in cycles.

With CPython's defaults (a young collection every 700 net allocations, every tenth of those
looking at gen 1, every tenth of those at everything) the collector scanned live objects
for nothing about once every forty dispatches and, now and then, walked every object
start-up built: about 15 µs of CPU per dispatch (``ledger_lab.bench.connector_cpu``).

:func:`tune` (called by ``ledger-stream connector``, the connector's own process, before it
serves; never by ``ConnectorWorker``, so a program running one keeps its own settings): the
objects alive then are moved out of the collector's reach (``gc.freeze``: they live as long
as the process) and a young collection waits for ``YOUNG`` allocations. Reference counting
still frees everything without a cycle at once; cycles (an exception and its traceback's
frames) wait a little longer.
"""

from __future__ import annotations

import gc

YOUNG = 50_000  # allocations between young collections (CPython's default: 700)
OLDER = (20, 20)  # young collections per gen-1 one, gen-1 ones per full one (default 10, 10)


def tune() -> None:
    """Freeze what start-up built and space the collections out. Calling it again only
    freezes what is alive by then."""
    gc.collect()  # what start-up left unreachable goes now, not into the frozen set
    gc.freeze()
    gc.set_threshold(YOUNG, *OLDER)

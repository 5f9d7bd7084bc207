"""The processor's garbage collection: tuned for a loop that allocates a batch's objects
and drops them all at its end.

CPython's cyclic collector runs a young collection every 700 net allocations (gen 0), and
every tenth of those looks at gen 1, every tenth of those at everything. A batch of 2,000
decisions allocates hundreds of thousands of objects, few in cycles, so most collections
scan live batch objects for nothing, and the rare full one walks every object the process
built at start-up (modules, schemas, the policy, the codec's tables) too.

:func:`tune` (once the processor has started): the objects alive then are moved out of the
collector's reach (``gc.freeze``: they live as long as the process), and a young collection
waits for ``YOUNG`` allocations. Reference counting still frees everything without a cycle
at once, so memory follows the batches as before; cycles wait a little longer. Each
collection's pause is measured (``gc.callbacks``) as ``ledger_gc_pause_seconds{generation}``
and counted in :func:`paused`, which the loop's stage log (stages.py) reads per batch.
"""

from __future__ import annotations

import gc
import time
from typing import Any

from ledger_stream.processor import metrics

YOUNG = 50_000  # allocations between young collections (CPython's default: 700)
OLDER = (20, 20)  # young collections per gen-1 one, gen-1 ones per full one (default 10, 10)

_started: list[float] = []
_paused = [0, 0.0]  # collections measured, seconds they paused (since the process started)


def _measure(phase: str, info: dict[str, Any]) -> None:
    if phase == "start":
        _started.append(time.perf_counter())
    elif _started:
        pause = time.perf_counter() - _started.pop()
        _paused[0] += 1
        _paused[1] += pause
        metrics.GC_PAUSE.labels(str(info.get("generation", 2))).observe(pause)


def paused() -> tuple[int, float]:
    """(collections, seconds paused) measured since :func:`tune` first ran: a difference of
    two readings is what fell between them."""
    return int(_paused[0]), _paused[1]


def tune() -> None:
    """Freeze what start-up built, space the collections out, and measure each pause.
    Calling it again only freezes what is alive by then."""
    gc.collect()  # what start-up left unreachable goes now, not into the frozen set
    gc.freeze()
    gc.set_threshold(YOUNG, *OLDER)
    if _measure not in gc.callbacks:
        gc.callbacks.append(_measure)

"""Which keys a repartition would move while their pre-grant may still be claimed.

A pre-granted attempt 1 belongs to the connector that fenced its Dispatch, as long as that
connector's claim was appended before the pre-grant's end: the processor judges such a
claim by its own broker time, however late it is read (docs/processor.md). A claim written
to a key's old partition after ``repartition`` checked that every input was decided is
forwarded to the key's new partition by the processor there, and stamped again by the
broker when it is: its first time is lost, and it reaches the new partition behind
records appended there in the meantime (a plain copy's claim among them). So
``repartition`` refuses while a moved key's pre-grant could still take such a claim: until
the pre-grant's end plus twice the clock-skew margin has passed by the migration's clock,
every claim its fencer may have written lies before the offsets the check read, and was
decided. Twice: a claim's time is the broker's (LogAppendTime) or, on a CreateTime topic,
the connector's clock, which the processor's preflight bounds within the margin of the
broker's; and the migration's host clock is within the margin of the broker's too.
"""

from __future__ import annotations

from collections.abc import Iterable

from ledger_stream.domain.decide import pregrant_end
from ledger_stream.domain.state import Phase
from ledger_stream.kafka.partitioner import partition_for
from ledger_stream.state.rows import decode_row

# The phases in which a key's pre-grant end (``pregrant_end``) is the first attempt's: waiting
# for its fencer's claim (RESERVED), or its grant withheld by a freeze (HELD).
WAITING = (Phase.RESERVED, Phase.HELD)


def running_pregrants(rows: Iterable[tuple[int, bytes, bytes]], to: int, checked_ms: int,
                      margin_ms: int) -> list[tuple[str, int]]:
    """(key, pre-grant end) of each row ``(old partition, key, row)`` whose key moves at
    ``to`` partitions and whose pre-grant end plus ``margin_ms`` is not before
    ``checked_ms`` (the wall clock when the inputs were checked as decided), in key
    order."""
    found = []
    for partition, key, row in rows:
        if partition_for(key, to) == partition:
            continue
        state = decode_row(row)
        end = pregrant_end(state) if state.phase in WAITING else 0
        if end and end + margin_ms >= checked_ms:
            found.append((key.decode("utf-8", "replace"), end))
    return sorted(found)

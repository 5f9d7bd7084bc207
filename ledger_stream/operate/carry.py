"""The partitions' freezes and held keys carried into a grown layout (``repartition``).

Each partition keeps its containment in one row (domain/containment.py): the freezes in
force, the keys it holds for them in the order held, and the freeze and unfreeze commands it
applied (so a retried command is recognised as a repeat). A freeze or unfreeze is written to
every partition in one transaction, so once every input is decided the partitions agree on
the freezes and on the commands; only the held keys are each partition's own.

Growing moves keys; their held entries move with them. The row of partition ``q`` of the new
layout is: the freezes and applied commands of the partition its keys came from
(``q % old``: the only source when ``to`` is a multiple of ``old``), and the held entries of
every old partition whose key is homed at ``q`` now, in the old partitions' order and each
one's held order. Partitions whose row does not change get none. Pure: no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from ledger_stream.domain.containment import HELD_LIMIT_BYTES, Containment, entry_bytes
from ledger_stream.kafka.partitioner import partition_for


class CarryRefused(Exception):
    """The containment cannot be carried as it is; the message says what to do."""


def carried_rows(rows: Mapping[int, bytes | None], to: int) -> dict[int, bytes]:
    """The containment row (as stored) each partition of the ``to``-partition layout must
    get, for the partitions whose row changes; ``rows``: the latest row of each partition of
    the old layout (None: none). CarryRefused when the old partitions disagree on the
    freezes in force, or a new partition would hold more than a row may."""
    old = len(rows)
    found = {p: _parse(p, row) for p, row in rows.items() if row is not None}
    if not found:
        return {}
    _require_agreement(found, old)
    held: dict[int, list[tuple[str, str]]] = {q: [] for q in range(to)}
    for p in sorted(found):
        for scope, key in found[p].held:
            held[partition_for(key, to)].append((scope, key))
    carried: dict[int, bytes] = {}
    for q in range(to):
        before = found.get(q) if q < old else None
        if q < old and (before.held if before else ()) == tuple(held[q]):
            continue  # unchanged: the processor's own row stays
        source = found.get(q % old) or found[min(found)]
        size = sum(entry_bytes(*entry) for entry in held[q])
        if size > HELD_LIMIT_BYTES:
            raise CarryRefused(f"partition {q} would hold {size} bytes of held keys (at most "
                               f"{HELD_LIMIT_BYTES}): unfreeze some scopes first")
        row = Containment(source.freezes, tuple(held[q]), size, source.applied).to_row()
        carried[q] = json.dumps(row, separators=(",", ":"), ensure_ascii=False).encode()
    return carried


def _parse(partition: int, row: bytes) -> Containment:
    try:
        return Containment.from_row(json.loads(row))
    except (ValueError, TypeError, KeyError) as exc:
        raise CarryRefused(f"the containment row of partition {partition} cannot be read "
                           f"({exc})") from exc


def _require_agreement(found: Mapping[int, Containment], old: int) -> None:
    """Every old partition holds the same freezes (the time each applied it aside)."""
    def freezes(c: Containment) -> frozenset[tuple[str, str, str, str]]:
        return frozenset((f.tenant, f.action, f.mode.value, f.event_id) for f in c.freezes)

    seen = {p: freezes(found[p]) if p in found else frozenset() for p in range(old)}
    if len(set(seen.values())) > 1:
        listed = "; ".join(f"partition {p}: {sorted((t or '*') + '/' + a for t, a, _, _ in s)}"
                           for p, s in sorted(seen.items()))
        raise CarryRefused(f"the partitions disagree on the freezes in force ({listed}): "
                           "freeze or unfreeze each scope again (`ledger-stream freezes` "
                           "lists them), start the processors until their lag is 0, stop "
                           "them, then run this again")

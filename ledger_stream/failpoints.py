"""Crash injection for tests: ``LEDGER_FAILPOINT=<name>`` kills the process with SIGKILL the
first time execution reaches that point, exactly like a power cut there.

Connector points, in protocol order: ``before_claim``, ``before_call`` (granted, target not
called), ``after_call`` (the target answered; nothing handled), ``before_outcome`` (outcome
classified, not produced), ``after_outcome`` (outcome acknowledged, dispatch offset not
committed). Agent points (the SDK): ``before_intent`` (nothing produced), ``after_intent``
(intent acknowledged, receipt not read), ``after_receipt`` (receipt read, not returned).
Processor points, in checkpoint order (ledger_stream/processor/checkpoint.py):
``processor_after_produce`` (a batch's outputs and changelog records handed to the producer,
not confirmed), ``processor_after_flush`` (all confirmed; offsets not committed, or the
transaction not committed), ``processor_after_commit`` (offsets committed, the local store
not written). Two points make the checkpoint fail instead of dying, as if the
transaction's commit timed out and the producer had to be replaced:
``processor_commit_unknown_before`` (before the commit, which then never happens) and
``processor_commit_unknown_after`` (after ``commit_transaction`` returned: it did commit).
``repartition_before_layout``: a repartition with every row written and the
new layout not recorded yet.

``<name>@N`` fires the N-th time execution reaches the point instead of the first (N >= 1),
for a crash mid-stream that does not depend on how fast the machine is: a processor killed
at ``processor_after_produce@30`` has confirmed 29 batches and decided the 30th.
"""

from __future__ import annotations

import os
import signal

ENV = "LEDGER_FAILPOINT"


def parse(spec: str) -> tuple[str, int]:
    """``"name"`` or ``"name@N"`` as (name, N); ``("", 0)`` for an empty spec."""
    if not spec:
        return "", 0
    name, at, count = spec.partition("@")
    if not at:
        return name, 1
    if not count.isdigit() or int(count) < 1:
        raise ValueError(f"{ENV}={spec!r}: the count after @ must be a whole number >= 1")
    return name, int(count)


_armed, _remaining = parse(os.environ.get(ENV, ""))


def reached(name: str) -> bool:
    """Whether ``name`` is the armed point and this is the N-th time execution reaches it
    (a point whose caller fails on purpose rather than dying)."""
    global _remaining
    if _armed and _armed == name:
        _remaining -= 1
        return _remaining == 0
    return False


def failpoint(name: str) -> None:
    if reached(name):
        os.kill(os.getpid(), signal.SIGKILL)

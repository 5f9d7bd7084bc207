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
not written).
"""

from __future__ import annotations

import os
import signal

ENV = "LEDGER_FAILPOINT"
_armed = os.environ.get(ENV, "")


def failpoint(name: str) -> None:
    if _armed and _armed == name:
        os.kill(os.getpid(), signal.SIGKILL)

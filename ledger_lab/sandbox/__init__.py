"""The payments sandbox: a reference target service, the ground truth of effects.

A small Stripe-like HTTP API (``POST /v1/payments`` with an ``Idempotency-Key``) that
applies at most one effect per key, answers a replay with the original payment and rejects a
reused key with another body, and records every request it receives in a SQLite file that
survives restarts. Faults (:mod:`.faults`) make it produce the ambiguous outcomes real APIs
produce: a dropped connection after the commit, a commit after the client's timeout, an
error before the commit, a crash before or after the commit.

Run it with ``ledger-stream sandbox`` or ``python -m ledger_lab.sandbox``; tests drive it
through ``tests/sandbox_harness.py``.
"""

from typing import TYPE_CHECKING

from ledger_lab.sandbox.faults import FAULT_MODES, Fault, FaultBoard, InvalidFault
from ledger_lab.sandbox.store import Payment, PaymentStore

if TYPE_CHECKING:
    from ledger_lab.sandbox.server import SandboxServer, make_server, run_sandbox

__all__ = [
    "FAULT_MODES",
    "Fault",
    "FaultBoard",
    "InvalidFault",
    "Payment",
    "PaymentStore",
    "SandboxServer",
    "make_server",
    "run_sandbox",
]

# The server loads the decision core (args_hash): on first use, not for `sandbox --help`.
_SERVER = ("SandboxServer", "make_server", "run_sandbox")

if not TYPE_CHECKING:

    def __getattr__(name: str) -> object:
        if name not in _SERVER:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        from ledger_lab.sandbox import server

        return getattr(server, name)

"""µs per call of one slice of the decision core, ``outputs.receipt_for`` (a key's receipt:
the answer to every intent, fresh or duplicate), in whichever core this process runs
(``LEDGER_CORE``) and, with ``--rust``, in the Rust (PyO3) port of this folder, called on
the same domain objects (their conversion both ways is in the figure).

    LEDGER_CORE=pure python ledger_lab/rust_slice/slice_bench.py --rust
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from typing import Any

import ledger_stream
from ledger_stream.domain import outputs
from ledger_stream.domain.events import Reason, Receipt, ReceiptStatus
from ledger_stream.domain.state import KeyState, Phase

STATES = [KeyState(key=f"acme/refund/{i}", phase=Phase.SUCCEEDED if i % 2 else Phase.RESERVED,
                   attempt=1 + i % 3, args_hash="ab" * 32, intent_event_id=f"ev-{i}",
                   external_id=f"x{i}") for i in range(1000)]
AT_MS = 1_700_000_000_000


def per_call_us(receipt_for: Callable[[KeyState, str, int], Any], rounds: int = 30) -> float:
    """The fastest round's µs per call (the machine is shared)."""
    best = float("inf")
    for _ in range(rounds):
        started = time.perf_counter()
        for state in STATES:
            receipt_for(state, "ev-dup", AT_MS)
        best = min(best, time.perf_counter() - started)
    return best / len(STATES) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rust", action="store_true", help="also the Rust port")
    args = parser.parse_args()
    found: dict[str, Any] = {"core": ledger_stream.CORE,
                             "python_us": per_call_us(outputs.receipt_for)}
    if args.rust:
        import receipt_slice  # the wheel `maturin build --release` makes of this folder

        rust = receipt_slice.Slice(Receipt, Phase, dict(outputs._PHASE_RECEIPT),
                                   ReceiptStatus.REJECTED, Reason.NONE)
        for state in STATES:  # the same receipt, field for field
            assert rust.receipt_for(state, "ev-dup", AT_MS) == \
                outputs.receipt_for(state, "ev-dup", AT_MS)
        found["rust_us"] = per_call_us(rust.receipt_for)
    print(json.dumps(found))


if __name__ == "__main__":
    main()

"""µs per receipt_for call: whichever core this process runs, and the Rust slice."""
import sys, time, json
import ledger_stream
from ledger_stream.domain import outputs
from ledger_stream.domain.events import Receipt, ReceiptStatus, Reason
from ledger_stream.domain.state import KeyState, Phase
from ledger_stream.domain.outputs import _PHASE_RECEIPT
states = [KeyState(key=f"acme:refund:{i}", phase=Phase.SUCCEEDED if i % 2 else Phase.RESERVED,
                   attempt=1 + i % 3, args_hash="ab" * 32, intent_event_id=f"ev-{i}",
                   external_id=f"x{i}") for i in range(1000)]
def run(fn, rounds=30):
    best = 1e9
    for _ in range(rounds):
        t = time.perf_counter()
        for s in states: fn(s, "ev-dup", 1_700_000_000_000)
        best = min(best, time.perf_counter() - t)
    return best / len(states) * 1e6
out = {"core": ledger_stream.CORE, "python_us": run(outputs.receipt_for)}
if len(sys.argv) > 1:
    import receipt_slice
    sl = receipt_slice.Slice(Receipt, Phase, dict(_PHASE_RECEIPT), ReceiptStatus.REJECTED, Reason.NONE)
    for s in states:
        assert sl.receipt_for(s, "ev-dup", 1_700_000_000_000) == outputs.receipt_for(s, "ev-dup", 1_700_000_000_000)
    out["rust_us"] = run(sl.receipt_for)
print(json.dumps(out))

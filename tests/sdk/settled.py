"""A key settled by the decision core itself, for the receipt cache's tests: the intent that
created it and the receipt that settled it succeeded."""

from __future__ import annotations

from ledger_stream.domain import events as ev
from ledger_stream.domain.decide import DEFAULT_POLICY, decide
from ledger_stream.domain.keys import args_hash, canonical_json
from ledger_stream.domain.outputs import state_receipt
from ledger_stream.domain.state import KeyState, Phase, absent
from ledger_stream.domain.transitions import enter

WORKFLOW = ev.Workflow("billing-bot", "1", "t-1", "refund")
ARGS = {"amount": 4200}
KEY = "acme/refund/r-1"


def intent(n: int, args: object = ARGS, key: str = KEY, **extra: object) -> ev.Intent:
    return ev.Intent(event_id=f"e-{n}", key=key, tenant=key.split("/")[0], action="refund",
                     target="payments", args_json=canonical_json(args),
                     args_hash=args_hash(args), workflow=WORKFLOW, at_ms=1, **extra)


def settle(intent: ev.Intent, now: int) -> tuple[KeyState, ev.Receipt]:
    """The key reserved by ``intent`` and settled succeeded by the processor's own core,
    with the receipt that settled it."""
    state = decide(absent(intent.key), intent, DEFAULT_POLICY, now).state
    done = enter(state, Phase.SUCCEEDED, now, external_id="pay-9", status_detail="paid")
    return done, state_receipt(done, now)

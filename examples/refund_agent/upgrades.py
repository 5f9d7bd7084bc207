"""New versions of the refund agent, as ``ledger-stream upgrade-check --graph`` loads them:
each attribute builds the graph a deploy would run (its ledger client from LEDGER_*
settings; the upgrade check holds back every intent it would submit).

    ledger-stream upgrade-check --checkpointer agent.sqlite \\
        --graph examples.refund_agent.upgrades:refund_v2_renamed \\
        --resume examples.refund_agent.upgrades:approve

- ``refund_v1_1``: 1.1, the same nodes and arguments: safe;
- ``refund_v2_renamed``: 2.0, the tools node renamed ``payments``: a thread whose refund
  step is pending loses it (dropped task, and the ledger's intent is an orphan);
- ``refund_v2_amounts``: 2.0, the amount in minor units: the same key with other
  arguments (conflict);
- ``refund_v2``: both changes; ``refund_agent_v2``: the same for the create_agent agent
  (the tool renamed, since its nodes keep their names).

``approve`` answers the approval interrupt as the approval service would today: an
approval bound to the arguments the human is shown, signed with the approver key in
LEDGER_APPROVAL_SIGNING_KEY.
"""

from __future__ import annotations

from typing import Any

from examples.refund_agent.approvals import sign_refund
from examples.refund_agent.graph import refund_args
from examples.refund_agent.variants import VARIANTS, Effects
from ledger_stream import LedgerClient
from ledger_stream.config import Settings


def _graph(variant: str) -> Any:
    chosen = VARIANTS[variant]
    return chosen.build(Effects(LedgerClient(Settings()), None, chosen.version), None)


def refund_v1() -> Any:
    """1.0, the deployed agent itself: what ``ledger-stream replay-plan`` replays with."""
    return _graph("refund")


def refund_v1_1() -> Any:
    return _graph("refund-v1.1")


def refund_v2_renamed() -> Any:
    return _graph("refund-v2-renamed")


def refund_v2_amounts() -> Any:
    return _graph("refund-v2-amounts")


def refund_v2() -> Any:
    return _graph("refund-v2")


def refund_agent_v2() -> Any:
    """The create_agent agent's 2.0: its refund tool renamed, the amount in minor units."""
    return _graph("refund-agent-v2")


def approve(_thread_id: str, asked: Any) -> dict[str, Any]:
    """The approval of the refund an approval interrupt shows."""
    material = refund_args(asked["args"]["invoice"], asked["args"]["amount"])
    return sign_refund(Settings(), material)

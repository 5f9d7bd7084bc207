"""The falsification matrix (``ledger-stream falsify``): try every known way to
make an agent's side effect happen twice, with real processes, real LangGraph checkpoints
and real SIGKILLs, and judge each run on the target's own ledger.

Each scenario runs with the ledger (one effect per operation key, distinct attempt ids,
conflicts rejected with no effect) and, where meaningful, with the ledger bypassed, where
it must produce the duplicate: that proves the scenario is real. The release gate
(docs/design.md, 'Proof layers') is computed from the results.

Needs a source checkout: the agent is ``examples/refund_agent`` (run from the repository
root), with LangGraph (``ledger-stream[langgraph]``) and, for the PostgreSQL checkpoint
saver, ``langgraph-checkpoint-postgres`` and a PostgreSQL server.
"""

from ledger_lab.falsify.gate import GATE_KEYS, gate_passed, release_gate
from ledger_lab.falsify.matrix import AGENTS, CASES, MIDDLEWARE_CASES, Case, select
from ledger_lab.falsify.report import document, table
from ledger_lab.falsify.result import RunResult
from ledger_lab.falsify.run import Run
from ledger_lab.falsify.runner import play, run_case, run_matrix

__all__ = [
    "AGENTS",
    "CASES",
    "GATE_KEYS",
    "MIDDLEWARE_CASES",
    "Case",
    "Run",
    "RunResult",
    "document",
    "gate_passed",
    "play",
    "release_gate",
    "run_case",
    "run_matrix",
    "select",
    "table",
]

"""The value objects every decision builds are built by compiled code in the compiled core:
``@dataclass`` generates an interpreted ``__init__`` (one ``object.__setattr__`` call per
field, 3 to 11 µs for a KeyState on a mypyc class), so the hot classes write theirs out and
mypyc compiles it into direct slot stores (tests/domain/test_written_out.py keeps them equal
to what ``@dataclass`` would generate)."""

from __future__ import annotations

import json

from tests.compiled.support import needs_build, run_python

pytestmark = needs_build

PROBE = """
import inspect, json
import ledger_stream
from ledger_stream.core import running
from ledger_stream.domain import events, state, transitions
classes = [state.KeyState, state.AttemptRecord, transitions.Decision, events.Intent,
           events.Workflow, events.Receipt, events.Dispatch, events.Alert,
           events.AttemptClaim, events.AttemptOutcome, events.Grant]
interpreted = [c.__name__ for c in classes if inspect.isfunction(c.__init__)]
copies = [f for f in (state.KeyState.changed, events.Receipt.with_origin)
          if inspect.isfunction(f)]
print(json.dumps({"core": running(), "interpreted": interpreted, "copies": len(copies)}))
"""


def test_the_hot_value_classes_are_built_by_compiled_code() -> None:
    done = run_python(PROBE, core="compiled")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"core": "compiled", "interpreted": [], "copies": 0}

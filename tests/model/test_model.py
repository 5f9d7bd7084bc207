"""The protocol model, checked by SPIN (docs/design.md, 'Proof layers').

``tests/model/ledger.pml`` is a Promela model of the protocol as implemented in
``ledger_stream/domain`` and ``ledger_stream/connector/core.py`` (README.md beside it maps each
rule to its code). Each configuration in ``configs.txt`` is built and searched by ``check.sh``
(in a temporary folder, never in the repository): at most one Grant per attempt, one call per
grant, at most one effect per key outside the documented window, no effect for a conflicting or
unaccepted intent, progress at quiescence, and ``duplicate_effect`` whenever a late second
effect is reported. A counterexample is written to ``tests/protocol_traces/ourmodel-NAME.txt``,
where ``tests/simulation/test_traces.py`` replays it on the real code, and is replayed here
step for step too (``model_replay.py``), so the failure says whether the real code breaks.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.model import background
from tests.model.model_replay import replay_problems

HERE = Path(__file__).resolve().parent
TRACES = HERE.parent / "protocol_traces"
INSTALL = "apt-get install -y spin gcc  (Debian/Ubuntu packages; the model needs both)"


def _missing_tools() -> list[str]:
    return [tool for tool in ("spin", "gcc") if shutil.which(tool) is None]


@pytest.mark.timeout(10)
def test_spin_and_gcc_are_installed():
    missing = _missing_tools()
    assert not missing, f"{' and '.join(missing)} not found: the model check needs them; {INSTALL}"


@pytest.mark.timeout(600)
@pytest.mark.parametrize(("name", "env", "flags"), background.configurations(), ids=lambda v: v
                         if isinstance(v, str) else "")
def test_model_configuration_holds(name: str, env: dict[str, str], flags: list[str],
                                   tmp_path_factory: pytest.TempPathFactory):
    missing = _missing_tools()
    assert not missing, f"{' and '.join(missing)} not found: cannot check the model; {INSTALL}"
    searches = background.running()  # started at collection (tests/model/background.py)
    found = searches.result(name, 540) if searches is not None else None
    returncode, out = found or background.search(name, env, flags,
                                                 tmp_path_factory.mktemp("spin"))
    if returncode == 1:
        trace = TRACES / f"ourmodel-{name}.txt"
        problems, _ = replay_problems(trace)
        verdict = (f"replayed on the real code: {problems}" if problems else
                   "replayed on the real code: no invariant breaks (model and code disagree, "
                   "or the replay cannot follow the trace: see its skipped steps)")
        pytest.fail(f"SPIN found a counterexample in {name} {' '.join(flags)}\n{out}\n"
                    f"trace written to {trace}; {verdict}\n\n{trace.read_text()}",
                    pytrace=False)
    assert returncode == 0, f"{name}: the search did not complete\n{out}"


def _model_traces() -> list[Path | None]:
    return list(sorted(TRACES.glob("ourmodel-*.txt"))) or [None]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("path", _model_traces(), ids=lambda p: p.name if p else "none-yet")
def test_model_counterexample_replays_without_a_violation(path: Path | None):
    """Every counterexample this model wrote, followed step for step by the real code (deadline
    timers, time-outs and dropped responses included), must break no invariant: an ablation's
    trace shows the rule it removed at work; a failure here is a real bug in the code."""
    if path is None:
        return  # no counterexample written yet
    problems, replay = replay_problems(path)
    assert not problems, (f"{path.name}: the real code breaks {problems}\nskipped steps:\n  "
                          + "\n  ".join(replay.skipped))

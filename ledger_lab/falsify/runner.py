"""Running cases: a fresh world per case, the ledger run, then the bypassed run.

Each case gets its own topic prefix (created here, deleted afterwards), processor,
connector, payments sandbox and checkpoint database, so no case can pass on another's
leftovers. A case whose world cannot be built, or whose scenario raises, is a failed
result with the reason, never an exception out of the matrix.
"""

from __future__ import annotations

import contextlib
import tempfile
import time
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path

from confluent_kafka.admin import AdminClient

from ledger_lab.falsify.matrix import Case
from ledger_lab.falsify.result import RunResult
from ledger_lab.falsify.run import Run
from ledger_lab.harness.agents import REPO_ROOT, AgentWorld, agent_world
from ledger_stream.config import Settings
from ledger_stream.kafka import topics

Say = Callable[[str], None]
DatabaseFor = Callable[[Case], str]  # a fresh PostgreSQL database (DSN) for a case


def play(case: Case, world: AgentWorld, ledger: bool) -> RunResult:
    """One run of ``case`` in ``world``: with the ledger, or bypassing it."""
    run = Run(world, scenario=case.number, label=case.label, title=case.title, ledger=ledger,
              durability=case.durability, graph=case.graph, variants=case.variants)
    try:
        return case.play(run)
    except Exception as exc:
        return run.fail(exc)


def run_case(case: Case, base: Settings, workdir: Path, *,
             database_for: DatabaseFor | None = None, root: Path = REPO_ROOT,
             bypass: bool | None = None) -> list[RunResult]:
    """Every run of ``case`` on the Kafka ``base`` points at; ``bypass`` False leaves out
    the run without the ledger (default: the case says)."""
    bypass = case.bypass if bypass is None else bypass and case.bypass
    started = time.monotonic()
    slug = "".join(ch if ch.isalnum() else "-" for ch in case.label)
    settings = base.model_copy(update={"topic_prefix": f"falsify-{slug}-{uuid.uuid4().hex[:6]}"})
    tmp = Path(tempfile.mkdtemp(prefix=f"case-{slug}-", dir=workdir))
    try:
        dsn = None
        if case.saver == "postgres":
            if database_for is None:
                raise RuntimeError("no PostgreSQL server for the postgres saver")
            dsn = database_for(case)
        _create_topics(settings)
        try:
            with agent_world(settings, tmp, case.saver, dsn, dict(case.processor_env),
                             root) as world:
                results = [play(case, world, ledger=True)]
                if bypass:
                    results.append(play(case, world, ledger=False))
                return results
        finally:
            _delete_topics(settings)
    except Exception as exc:  # the world itself failed: the case fails, the matrix goes on
        return [RunResult(case.number, case.label, case.title, True, False,
                          f"world failed: {type(exc).__name__}: {exc}",
                          seconds=round(time.monotonic() - started, 1))]


def run_matrix(cases: Iterable[Case], base: Settings, workdir: Path, *,
               database_for: DatabaseFor | None = None, root: Path = REPO_ROOT,
               say: Say = print) -> list[RunResult]:
    results: list[RunResult] = []
    cases = list(cases)
    for n, case in enumerate(cases, 1):
        say(f"[{n}/{len(cases)}] {case.label}: {case.title}")
        for result in run_case(case, base, workdir, database_for=database_for, root=root):
            mode = "ledger" if result.with_ledger else "bypassed"
            verdict = "pass" if result.passed else "FAIL"
            say(f"    {mode:8} {verdict} in {result.seconds:.1f}s: {result.why}")
            results.append(result)
    return results


def _create_topics(settings: Settings) -> None:
    assert settings.kafka_bootstrap
    topics.require_matching(topics.create_topics(settings.kafka_bootstrap, settings))


def _delete_topics(settings: Settings) -> None:
    assert settings.kafka_bootstrap
    admin = AdminClient({"bootstrap.servers": settings.kafka_bootstrap})
    names = [spec.name for spec in topics.ledger_topics(settings)]
    for future in admin.delete_topics(names, operation_timeout=30).values():
        # Best effort: a leftover topic changes no verdict.
        with contextlib.suppress(Exception):
            future.result()

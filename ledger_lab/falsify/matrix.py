"""The falsification matrix: every case, its expectation, and the quick subset.

A :class:`Case` is one scenario in one setting (checkpoint saver, durability, failpoint).
Each case runs in a world of its own (fresh topics, processor, connector, sandbox), with
the ledger and, where that is meaningful, once more with the ledger bypassed.

The agent's flavour: the cases as written run the refund agent built on ``ledger_tool``.
``select(..., agent="middleware")`` gives the same cases run by the agent built with
LangChain's ``create_agent`` and ``LedgerMiddleware`` (variant ``refund-agent``), labelled
``M<label>``, with the scenarios' own variants (v2, parallel calls) in their create_agent form;
scenarios 14, 17 and 18 are not repeated (their refund is no tool call).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace

from ledger_lab.falsify.result import RunResult
from ledger_lab.falsify.run import Run
from ledger_lab.falsify.scenarios import (
    concurrency,
    deliveries,
    failpoints,
    interrupts,
    lifecycle,
    network,
    replays,
    restarts,
    watched,
)

Scenario = Callable[[Run], RunResult]
SAVERS = ("sqlite", "postgres")
DURABILITIES = ("sync", "async")
QUICK_FAILPOINTS = ("before_call",)


@dataclass(frozen=True)
class Case:
    number: int
    label: str
    title: str
    expectation: str
    play: Scenario
    bypass: bool = True  # also run with the ledger bypassed (the duplicate must show)
    saver: str = "sqlite"
    durability: str = "sync"
    processor_env: Mapping[str, str] = field(default_factory=dict)
    quick: bool = False  # part of the fast subset (`--quick`)
    graph: str | None = None  # the agent variant workers run unless a scenario names one
    variants: Mapping[str, str] = field(default_factory=dict)  # a scenario's variant -> this


ONE = "one effect, key succeeded"


def _failpoint_cases() -> list[Case]:
    cases = []
    for saver in SAVERS:
        for durability in DURABILITIES:
            for point in failpoints.FAILPOINTS:
                side = "worker" if point in failpoints.AGENT_FAILPOINTS else "connector"
                cases.append(Case(
                    5, f"5 {point} {saver}/{durability}", f"SIGKILL the {side} at {point}",
                    f"{ONE}; bypassed: a second payment"
                    if point in failpoints.BYPASS_MEANINGFUL else ONE,
                    failpoints.killed_at(point), point in failpoints.BYPASS_MEANINGFUL,
                    saver, durability,
                    quick=(saver, durability) == ("sqlite", "sync")
                    and point in QUICK_FAILPOINTS))
    return cases


CASES: tuple[Case, ...] = (
    Case(1, "1", "kill after the target committed, then resume",
         f"{ONE}; bypassed: two payments", replays.kill_after_commit_then_resume, quick=True),
    Case(2, "2", "replay the pre-call checkpoint",
         f"{ONE}, the replay gets the original receipt; bypassed: two payments",
         replays.replay_pre_call_checkpoint),
    Case(3, "3", "fork the pre-call checkpoint, same arguments",
         f"{ONE}, the fork gets the original receipt; bypassed: two payments",
         replays.fork_same_args),
    Case(4, "4", "fork with a changed amount after the call",
         "rejected (conflict, alert), the changed amount never reaches the target; one "
         "effect; bypassed: two payments", replays.fork_changed_amount, quick=True),
    Case(4, "4b", "fork with a changed amount before the call",
         "rejected (approval bound to the original amount, alert), nothing reaches the "
         "target; bypassed: the unapproved amount is paid",
         replays.fork_changed_amount_before_call),
    *_failpoint_cases(),
    Case(6, "6", "target commits, then drops the connection",
         f"unknown, reconciled by lookup: {ONE}; bypassed: the agent retries, two payments",
         network.commit_then_drop, quick=True),
    Case(6, "6b", "target cannot be queried: commits, then drops the connection",
         "unknown, not queryable: the key ends needs_reconciliation, one effect, a replay "
         "resends nothing; bypassed: the agent retries, two payments",
         network.commit_then_drop_unqueryable),
    Case(7, "7", "client times out before the target commits",
         f"unknown, reconciled, resent with the same key: {ONE}; bypassed: two payments",
         network.timeout_before_commit),
    Case(8, "8", "target crashes after committing, restarted",
         f"unknown, reconciled once the target is back: {ONE}; bypassed: two payments",
         network.target_restart_after_commit),
    Case(8, "8b", "target crashes before committing, restarted",
         f"unknown, reconciled (not found), resent with the same key: {ONE}",
         network.target_restart_before_commit, bypass=False),
    Case(9, "9", "processor SIGKILLed mid-operation, restarted",
         f"the new processor settles the key from the reported outcome: {ONE}",
         restarts.processor_restart, bypass=False),
    Case(10, "10", "connector SIGKILLed mid-call, restarted",
         f"the replacement meets the key again, the target replays: {ONE}",
         restarts.connector_restart, bypass=False),
    Case(11, "11", "two workers resume the same thread at once",
         f"two intents, {ONE}; bypassed: two payments",
         concurrency.two_workers_resume_at_once, quick=True),
    Case(12, "12", "retry just before and just after key expiry",
         "before: the original receipt; after: rejected (expired_key), never dispatched; "
         "one effect; bypassed: two payments", lifecycle.retry_around_expiry,
         processor_env=lifecycle.EXPIRY_ENV),
    Case(13, "13", "incompatible update: v2 renames the node, derives other arguments",
         "upgrade-check flags the v1 thread first (exit 1, orphan); v2 resuming v1's "
         "thread sends nothing; v2 (other arguments) while v1 is in "
         "flight or after it settled: rejected (conflict); the v1 graph as 2.0 (same "
         "arguments) while v1 is in flight: held (version_mismatch); one effect with v1's "
         "arguments; bypassed: two payments", lifecycle.incompatible_update),
    Case(14, "14", "side effect before interrupt(), resumed and replayed",
         f"three intents, {ONE}; bypassed: three payments",
         interrupts.effect_before_interrupt),
    Case(15, "15", "two parallel tool calls in one step, killed, resumed, replayed",
         "two keys, one effect each; bypassed: a second payment",
         concurrency.parallel_tool_calls, quick=True),
    Case(16, "16", "a second worker's tool pays around the ledger",
         f"the watcher alerts effect_without_intent for the key within seconds; the key "
         f"keeps {ONE}; bypassed: two payments, no alert", watched.bypass_caught_at_target),
    Case(17, "17", "functional API (@entrypoint/@task): SIGKILL inside the task, resumed",
         f"two intents, {ONE}; bypassed: two payments", deliveries.functional_task_killed),
    Case(18, "18", "a work queue redelivers the job of a worker killed before its ack",
         f"two intents, {ONE}; bypassed: two payments", deliveries.queue_redelivery),
)


AGENTS = ("tool", "middleware")
# The refund runs inside a node, a task or a queue worker, not as a tool call: no middleware.
NOT_A_TOOL_CALL = {14, 17, 18}
MIDDLEWARE_QUICK = {"1"}  # the middleware cases pytest runs (make test)
# The variants the scenarios name, as the create_agent agent has them.
MIDDLEWARE_VARIANTS = {"refund-v2": "refund-agent-v2", "parallel": "refund-agent-parallel"}


def _middleware(case: Case) -> Case:
    return replace(case, label=f"M{case.label}", title=f"{case.title} (create_agent + "
                   "LedgerMiddleware)", graph="refund-agent", variants=MIDDLEWARE_VARIANTS,
                   quick=case.label in MIDDLEWARE_QUICK)


MIDDLEWARE_CASES: tuple[Case, ...] = tuple(
    _middleware(c) for c in CASES if c.number not in NOT_A_TOOL_CALL)


def select(numbers: Iterable[int] | None = None, quick: bool = False,
           savers: Iterable[str] = SAVERS, agent: str = "tool") -> list[Case]:
    """The cases of the given scenario numbers (all when None), only the fast subset with
    ``quick``, only the given checkpoint savers, run by the ``agent`` flavour (``tool``:
    ``ledger_tool``; ``middleware``: ``create_agent`` with ``LedgerMiddleware``)."""
    if agent not in AGENTS:
        raise ValueError(f"unknown agent flavour {agent!r}; choose from {', '.join(AGENTS)}")
    wanted = set(numbers) if numbers is not None else None
    allowed = set(savers)
    cases = CASES if agent == "tool" else MIDDLEWARE_CASES
    return [c for c in cases if (wanted is None or c.number in wanted)
            and (c.quick or not quick) and c.saver in allowed]

"""``ledger-stream replay-plan`` on the real thing: the refund agent's worker processes on a
SQLite or PostgreSQL checkpointer, a processor on a real broker, a payments sandbox and its
connector, the CLI reading the ledger's changelog.

One thread pays its refund: a replay from the checkpoint before the payment is safe (the
original receipt). Then the refund amount is changed in a fork (update_state): a replay
from the fork is rejected. Another thread was killed after its approval and before its
intent: the ledger never saw its key, so a replay from before the tools step is a new
effect, and, planned for an hour later, its approval is stale. Nothing is produced."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from ledger_lab.harness.agents import PROCESSOR_ENV, AgentWorld, agent_world
from ledger_lab.harness.approvers import TEST_APPROVER, write_signing_key
from ledger_lab.harness.processes import processor_group
from ledger_stream.config import Settings
from ledger_stream.domain import events as ev
from ledger_stream.kafka.reader import read_topic

pytestmark = pytest.mark.timeout(420)
GRAPH = "examples.refund_agent.upgrades:refund_v1"
RESUME = "examples.refund_agent.upgrades:approve"
PAID, KILLED = "acme/refund/inv-paid", "acme/refund/inv-killed"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def world(request, ledger_topics: Settings, tmp_path: Path) -> Iterator[AgentWorld]:
    dsn = request.getfixturevalue("postgres_dsn") if request.param == "postgres" else None
    with agent_world(ledger_topics, tmp_path, saver=request.param, dsn=dsn) as w:
        yield w


def plan(world: AgentWorld, thread: str, *extra: str, table: bool = False
         ) -> tuple[int, Any, str]:
    s = world.stack.settings
    env = {**os.environ, "LEDGER_KAFKA_BOOTSTRAP": world.stack.bootstrap,
           "LEDGER_TOPIC_PREFIX": s.topic_prefix, **PROCESSOR_ENV,
           "LEDGER_CONSUMER_GROUP": processor_group(s),
           "LEDGER_APPROVAL_SIGNING_KEY": str(write_signing_key(TEST_APPROVER,
                                                                world.stack.tmp))}
    done = subprocess.run([sys.executable, "-m", "ledger_stream.cli.main", "replay-plan",
                           *([] if table else ["--json"]), "--graph", GRAPH, "--resume", RESUME,
                           "--checkpointer", world.db, "--thread", thread, *extra],
                          env=env, capture_output=True, text=True, timeout=180,
                          cwd=world.root)
    if table:
        return done.returncode, done.stdout, done.stderr[-3000:]
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
    return done.returncode, json.loads(lines[-1]) if lines else {}, done.stderr[-3000:]


def by_next(found: dict[str, Any], node: str) -> list[dict[str, Any]]:
    """The checkpoints whose replay starts with ``node``, newest first."""
    return [c for c in found["checkpoints"] if c["next"] == [node]]


def kinds(checkpoint: dict[str, Any]) -> list[tuple[str, str]]:
    return [(f["kind"], f["key"] or f["node"]) for f in checkpoint["findings"]]


def test_which_checkpoint_a_replay_is_safe_from(world: AgentWorld):
    assert world.worker("paid", "start", "--invoice", "inv-paid", "--amount", "125"
                        ).returncode == 0
    assert world.worker("paid", "approve").returncode == 0
    world.stack.await_key(PAID, {ev.ReceiptStatus.SUCCEEDED})
    intents_before = len(read_topic(world.stack.bootstrap,
                                    world.stack.settings.topic("intents")))

    code, found, log = plan(world, "paid")
    assert code == 0, (found, log)  # every checkpoint: the original receipt, or nothing
    (before_payment,) = by_next(found, "tools")
    assert before_payment["verdict"] == "safe"
    assert kinds(before_payment) == [("safe", PAID)]
    assert all(c["verdict"] == "safe" for c in found["checkpoints"])

    # The refund amount changed in a fork: a replay from it asks the key with other args.
    assert world.worker("paid", "fork", "--amount", "999").returncode == 0
    code, found, log = plan(world, "paid")
    assert code == 1, (found, log)
    fork, original = by_next(found, "tools")  # newest first: the update_state checkpoint
    assert fork["source"] == "update" and fork["verdict"] == "rejected"
    assert kinds(fork) == [("rejected", PAID)]
    assert "other arguments" in fork["findings"][0]["detail"]
    assert original["verdict"] == "safe"
    code, table, log = plan(world, "paid", table=True)
    assert code == 1 and f"\trejected\trejected\t{PAID}\tother arguments" in table, log

    # Killed after its approval, before its intent: the ledger never saw the key.
    assert world.worker("killed", "start", "--invoice", "inv-killed", "--amount", "40"
                        ).returncode == 0
    assert world.worker("killed", "approve", failpoint="before_intent").returncode != 0
    code, found, log = plan(world, "killed")
    assert code == 1, (found, log)
    (before_tools,) = by_next(found, "tools")
    assert kinds(before_tools) == [("new_effect", KILLED)]
    later = (datetime.now(UTC) + timedelta(hours=1)).isoformat()  # approvals last 10 min
    code, found, log = plan(world, "killed", "--at", later)
    (before_tools,) = by_next(found, "tools")
    assert kinds(before_tools) == [("stale_approval", KILLED)]
    assert before_tools["findings"][0]["detail"] == "approval expired"
    # Before the approval: --resume signs one now, for ten minutes; an hour on, stale too.
    (before_approval,) = by_next(found, "approval")
    assert kinds(before_approval) == [("stale_approval", KILLED)]

    # A dry run: nothing was produced, nothing paid twice.
    time.sleep(1)
    assert len(read_topic(world.stack.bootstrap, world.stack.settings.topic("intents"))
               ) == intents_before + 1  # the fork's own run, and nothing of the plans
    assert len(world.effects("inv-paid")) == 1
    assert world.effects("inv-killed") == []

    code, _found, log = plan(world, "no-such-thread")
    assert code == 2 and "has no checkpoint" in log, log

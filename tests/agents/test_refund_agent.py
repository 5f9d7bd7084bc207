"""The refund agent (real LangGraph, SqliteSaver, ToolNode, interrupt) through the ledger."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from ledger_stream.config import Settings
from ledger_stream.testing.agents import AgentWorld, agent_world

pytestmark = pytest.mark.timeout(240)


@pytest.fixture
def world(ledger_topics: Settings, tmp_path: Path) -> Iterator[AgentWorld]:
    with agent_world(ledger_topics, tmp_path) as w:
        yield w


def approved_thread(world: AgentWorld, bypass: bool = False) -> tuple[str, str]:
    thread, invoice = f"t-{uuid.uuid4().hex[:6]}", f"inv-{uuid.uuid4().hex[:6]}"
    start = world.worker(thread, "start", "--invoice", invoice, "--amount", "125",
                         bypass=bypass)
    assert start.returncode == 0, start.log
    return thread, invoice


def test_happy_path_one_refund(world):
    thread, invoice = approved_thread(world)
    done = world.worker(thread, "approve")
    assert done.returncode == 0, done.log
    receipt = done.output["ledger_receipts"][f"acme/refund/{invoice}"]
    (effect,) = world.effects(invoice)
    assert (receipt["status"], receipt["external_id"]) == ("succeeded", effect["id"])


@pytest.mark.parametrize("bypass", [False, True], ids=["ledger", "bypassed"])
def test_killed_after_the_effect_before_the_reply_is_saved_then_resumed(world, bypass):
    thread, invoice = approved_thread(world, bypass)
    killed = world.worker(thread, "approve", failpoint="after_receipt", bypass=bypass)
    assert killed.returncode == -9, killed.log
    resumed = world.worker(thread, "resume", bypass=bypass)
    assert resumed.returncode == 0, resumed.log
    # Without the ledger the resumed step pays again; with it, once.
    assert len(world.effects(invoice, bypass)) == (2 if bypass else 1)

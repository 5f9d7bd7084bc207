"""``ledger-stream mcp`` driven by the MCP SDK's own client, over stdio and streamable HTTP, on
the real broker, processor, HTTP connector and payments sandbox. Effects are counted in the
sandbox's own ledger (the ground truth), never from what the server answers."""

from __future__ import annotations

import asyncio
import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters

from ledger_lab.harness.sandbox import SandboxProc
from ledger_lab.harness.stack import Stack
from ledger_lab.local_kafka.ports import pick_free_ports
from ledger_stream.cli.main import main as cli
from ledger_stream.config import Settings
from ledger_stream.domain.keys import args_hash
from tests.mcp.support import EFFECTS, REPO, _http_server, keyed, server_args

pytestmark = pytest.mark.timeout(180)




def stdio(settings: Settings) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=server_args(settings),
                                 env=dict(os.environ), cwd=str(REPO))


async def _calls(server: Any, calls: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    async with Client(server, read_timeout_seconds=90) as client:
        return [await client.call_tool(name, arguments) for name, arguments in calls]


def calls(server: Any, *pairs: tuple[str, dict[str, Any]]) -> list[Any]:
    """One session (one server process for stdio): the tools' results, in order."""
    return asyncio.run(_calls(server, list(pairs)))


def refund(invoice: str, amount: float, wait: float = 60.0) -> tuple[str, dict[str, Any]]:
    return "submit_effect", {"effect": "refund",
                             "arguments": {"invoice": invoice, "amount": amount},
                             "wait_seconds": wait}


def content(result: Any) -> dict[str, Any]:
    assert not result.is_error, result
    data: dict[str, Any] = result.structured_content
    return data


@pytest.fixture
def payments(stack: Stack, sandbox: SandboxProc) -> SandboxProc:
    stack.connector("http", "--name", "payments", "--base-url", sandbox.url)
    return sandbox


def test_stdio_repeat_after_a_restart_pays_once_conflicts_refused_open_work_listed(
        stack: Stack, payments: SandboxProc) -> None:
    invoice, welcome = f"inv-{uuid.uuid4().hex[:8]}", f"{uuid.uuid4().hex[:8]}"
    key = f"acme/refund/{invoice}"
    server = stdio(stack.settings)

    (listed,) = asyncio.run(_list_tools(server))
    first = content(calls(server, refund(invoice, 12.5))[0])
    # A new session: the server process of the first call has exited; this is another one.
    results = calls(
        server, refund(invoice, 12.5), refund(invoice, 99.0),
        ("get_operation", {"effect": "refund", "arguments": {"invoice": invoice}}),
        # No connector for smtp: the intent is accepted and stays unsettled.
        ("submit_effect", {"effect": "mail", "arguments": {"to_hash": welcome},
                           "wait_seconds": 2}),
        ("list_unresolved", {}),
        ("get_operation", {"effect": "refund", "arguments": {"invoice": "never-submitted"}}))
    # The conflict is a refusal: isError, with the answer as structured content.
    assert results[1].is_error and results[1].structured_content["answer"] == "rejected"
    again, conflict, state, mail, unresolved, missing = (
        r.structured_content if i == 1 else content(r) for i, r in enumerate(results))

    (paid,) = payments.effects(key)  # the sandbox's own ledger: one payment
    assert listed == {"submit_effect", "get_operation", "list_unresolved"}
    assert (first["status"], first["resolved"], first["hold_downstream"]) == (
        "succeeded", True, False)
    assert (first["state"], first["answer"]) == ("succeeded", "created")
    assert first["external_id"] == again["external_id"] == paid["id"]
    assert (again["status"], again["state"], again["answer"]) == (
        "succeeded", "succeeded", "already_done")
    assert (conflict["status"], conflict["reason"], conflict["resolved"]) == (
        "rejected", "conflict", True)
    assert (conflict["state"], conflict["answer"]) == ("succeeded", "rejected")
    held = args_hash({"invoice": invoice, "amount": 12.5})
    assert held not in str(results[1])  # no hash of the held arguments
    # The key succeeded; the latest call it answered (the conflict) was refused.
    assert (state["found"], state["key_status"], state["external_id"]) == (
        True, "succeeded", paid["id"])
    assert (state["state"], state["status"], state["answer"]) == (
        "succeeded", "succeeded", "rejected")
    assert (mail["status"], mail["resolved"], mail["hold_downstream"]) == (
        "accepted", False, True)
    assert [(op["key"], op["business_id"]) for op in unresolved["operations"]] == [
        (f"acme/send_email/{welcome}", {"to_hash": welcome})]
    assert missing["found"] is False


def test_a_regenerated_call_with_another_model_written_id_pays_once(
        stack: Stack, payments: SandboxProc) -> None:
    """The same refund asked twice, as a host does after a regenerated model answer: a new
    session (a new server process, new request and tool call ids) and another id the model
    wrote for the call. The key comes from the registered key field (the invoice), so both
    calls meet one key and the payments API sees one payment."""
    invoice = f"inv-{uuid.uuid4().hex[:8]}"
    server = stdio(stack.settings)
    answers = []
    for model_written in (f"call-{uuid.uuid4().hex[:6]}", f"refund-{uuid.uuid4().hex[:6]}"):
        name, arguments = refund(invoice, 30.0)
        answers.append(content(calls(server, (name, {**arguments,
                                                     "operation_id": model_written}))[0]))
    first, again = answers
    assert first["key"] == again["key"] == f"acme/refund/{invoice}"
    assert first["business_id"] == {"invoice": invoice}
    (paid,) = payments.ledger()["effects"]  # every payment the target made: one
    assert (first["status"], again["status"]) == ("succeeded", "succeeded")
    assert first["external_id"] == again["external_id"] == paid["id"]


async def _list_tools(server: Any) -> list[set[str]]:
    async with Client(server, read_timeout_seconds=90) as client:
        return [{tool.name for tool in (await client.list_tools()).tools}]


def test_bad_calls_are_tool_errors_that_say_what_is_wrong(ledger_settings: Settings) -> None:
    unknown, bad_id, no_id, bad_wait = calls(
        stdio(ledger_settings),
        ("submit_effect", {"effect": "wire", "arguments": {"invoice": "x"}}),
        ("submit_effect", {"effect": "refund", "arguments": {"invoice": "a/b"}}),
        ("submit_effect", {"effect": "refund", "operation_id": "inv-1",
                           "arguments": {"amount": 1}}),
        ("submit_effect", {"effect": "refund", "arguments": {"invoice": "a"},
                           "wait_seconds": -1}))
    assert unknown.is_error and "unknown effect 'wire'" in unknown.content[0].text
    assert bad_id.is_error and "invalid operation key part 'a/b'" in bad_id.content[0].text
    assert no_id.is_error and "effect 'refund' needs the argument 'invoice'" in \
        no_id.content[0].text
    assert bad_wait.is_error and "wait_seconds must be between" in bad_wait.content[0].text








@pytest.fixture
def http_port() -> Iterator[int]:
    yield pick_free_ports(1)[0]


def test_streamable_http_repeat_after_a_sigkilled_server_pays_once(
        stack: Stack, payments: SandboxProc, http_port: int, tmp_path: Path) -> None:
    invoice = f"inv-{uuid.uuid4().hex[:8]}"
    url = f"http://127.0.0.1:{http_port}/mcp"
    proc = _http_server(stack.settings, http_port, tmp_path / "mcp.log")
    try:
        first = content(calls(keyed(url), refund(invoice, 40.0))[0])
        proc.kill()  # SIGKILL by PID: the host's next call meets a new server
        proc.wait(10)
        proc = _http_server(stack.settings, http_port, tmp_path / "mcp.log")
        again = content(calls(keyed(url), refund(invoice, 40.0))[0])
    finally:
        proc.kill()
        proc.wait(10)
    (paid,) = payments.effects(f"acme/refund/{invoice}")
    assert first["external_id"] == again["external_id"] == paid["id"]


def test_without_the_ledger_the_repeat_pays_twice(sandbox: SandboxProc) -> None:
    """The falsification pair of the stdio test: the same host behaviour (a call repeated on
    a new server process) against an MCP server that calls the payments API directly."""
    invoice = f"inv-{uuid.uuid4().hex[:8]}"
    direct = StdioServerParameters(
        command=sys.executable, args=["-m", "examples.mcp.direct_server", "--payments-url",
                                      sandbox.url], env=dict(os.environ), cwd=str(REPO))
    for _ in range(2):
        assert not calls(direct, refund(invoice, 12.5))[0].is_error
    paid = [e for e in sandbox.ledger()["effects"]
            if e["idempotency_key"].startswith(f"bypass-{invoice}-")]
    assert len(paid) == 2


def test_cli_says_what_is_missing(capsys: pytest.CaptureFixture[str],
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LEDGER_MCP_TENANT", raising=False)
    assert cli(["mcp", "--effects", EFFECTS, "--bootstrap", "127.0.0.1:1"]) == 2
    assert "--tenant (LEDGER_MCP_TENANT) is required" in capsys.readouterr().err
    assert cli(["mcp", "--tenant", "acme", "--effects", "refund", "--bootstrap",
                "127.0.0.1:1"]) == 2
    assert "NAME=ACTION@TARGET" in capsys.readouterr().err
    # A registration naming no business id (the older syntax) is refused at start.
    assert cli(["mcp", "--tenant", "acme", "--effects", "refund=refund@payments",
                "--bootstrap", "127.0.0.1:1"]) == 2
    assert "effect 'refund' names no business id" in capsys.readouterr().err
    with pytest.raises(SystemExit) as bad_flag:
        cli(["mcp", "--transport", "ftp"])
    assert bad_flag.value.code == 2
    assert "invalid choice: 'ftp'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as helped:
        cli(["mcp", "--help"])
    assert helped.value.code == 0
    assert "submit_effect" in capsys.readouterr().out

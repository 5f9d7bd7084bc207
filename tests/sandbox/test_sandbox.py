"""The payments sandbox as a client sees it: a real process, real HTTP, its own ledger.

Each fault test asserts what the client observed *and* what the sandbox's ledger holds
afterwards (after a restart for the crash modes): the ground truth the ledger tests rely on.
"""

from __future__ import annotations

import http.client
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ledger_lab.harness.sandbox import CLI_COMMAND, SandboxProc
from ledger_stream.domain.keys import args_hash

pytestmark = pytest.mark.timeout(60)

KEY = "acme/refund/invoice-881"
BODY = {"amount": 1250, "currency": "EUR", "invoice": "invoice-881"}


def has_effect(key: str) -> Callable[[dict[str, Any]], bool]:
    return lambda ledger: any(e["idempotency_key"] == key for e in ledger["effects"])


def test_new_key_then_replay_then_conflict(sandbox: SandboxProc):
    created = sandbox.post_payment(KEY, BODY, attempt_id="claim-1")
    assert created.status == 201
    assert created.body["id"].startswith("pay_")
    assert created.body == {"id": created.body["id"], "idempotency_key": KEY,
                            "status": "succeeded"}
    assert created.headers.get("Idempotent-Replayed") is None

    replayed = sandbox.post_payment(KEY, dict(reversed(BODY.items())), attempt_id="claim-2")
    assert replayed.status == 200
    assert replayed.body == created.body
    assert replayed.headers["Idempotent-Replayed"] == "true"

    conflict = sandbox.post_payment(KEY, {**BODY, "amount": 9999}, attempt_id="claim-3")
    assert conflict.status == 409
    assert conflict.body["error"] == "idempotency_key_reused"

    ledger = sandbox.ledger()
    assert ledger["effects"] == [{
        "idempotency_key": KEY, "id": created.body["id"], "body_hash": args_hash(BODY),
        "attempt_id": "claim-1", "created_at": ledger["effects"][0]["created_at"],
        "body": BODY,  # the first body: what a watcher maps to a business key
    }]
    assert [(r["attempt_id"], r["result"]) for r in ledger["requests"]] == [
        ("claim-1", "created"), ("claim-2", "replayed"), ("claim-3", "conflict")]


def test_lookup_by_key_with_slashes(sandbox: SandboxProc):
    assert sandbox.payment_by_key(KEY).status == 404
    assert sandbox.payment_by_key(KEY).body == {
        "error": "not_found", "message": "no payment for this idempotency key"}
    created = sandbox.post_payment(KEY, BODY)
    found = sandbox.payment_by_key(KEY)
    assert (found.status, found.body) == (200, created.body)
    assert sandbox.payment_by_key("acme/refund").status == 404


def test_bad_requests_are_rejected_without_effect(sandbox: SandboxProc):
    missing = sandbox.post_payment(None, BODY)
    assert (missing.status, missing.body["error"]) == (400, "missing_idempotency_key")
    malformed = sandbox.post_payment(KEY, b'{"amount": 12')
    assert (malformed.status, malformed.body["error"]) == (400, "malformed_json")
    assert "not valid JSON" in malformed.body["message"]
    not_object = sandbox.post_payment(KEY, [1, 2])
    assert (not_object.status, not_object.body["error"]) == (400, "body_not_object")
    assert sandbox.request("GET", "/v1/nothing").status == 404
    wrong_method = sandbox.request("DELETE", "/v1/ledger")
    assert (wrong_method.status, wrong_method.headers["Allow"]) == (405, "GET")
    assert sandbox.request("GET", "/health").body == {"ok": True}
    assert sandbox.ledger() == {"effects": [], "requests": []}


def test_concurrent_identical_posts_create_one_effect(sandbox: SandboxProc):
    start = threading.Barrier(20)
    statuses: list[int] = []
    ids: set[str] = set()

    def post() -> None:
        start.wait()
        response = sandbox.post_payment(KEY, BODY, timeout_s=20)
        statuses.append(response.status)
        ids.add(response.body["id"])

    threads = [threading.Thread(target=post) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sorted(statuses) == [200] * 19 + [201]
    assert len(ids) == 1
    assert len(sandbox.effects(KEY)) == 1


def test_effects_survive_sigkill_and_restart_on_the_same_port(sandbox: SandboxProc):
    created = sandbox.post_payment(KEY, BODY)
    url = sandbox.url
    sandbox.kill()
    sandbox.restart()
    assert sandbox.url == url
    assert sandbox.effects(KEY)[0]["id"] == created.body["id"]
    replayed = sandbox.post_payment(KEY, BODY)
    assert (replayed.status, replayed.body) == (200, created.body)


def test_sigterm_stops_cleanly(sandbox: SandboxProc):
    assert sandbox.stop() == 0


def test_the_cli_subcommand_serves_the_same_api(tmp_path: Path):
    sandbox = SandboxProc(tmp_path / "sandbox.db", command=CLI_COMMAND)
    try:
        assert sandbox.post_payment(KEY, BODY).status == 201
        assert len(sandbox.effects(KEY)) == 1
    finally:
        assert sandbox.stop() == 0


def test_commit_then_drop(sandbox: SandboxProc):
    sandbox.set_fault("commit_then_drop")
    with pytest.raises((http.client.RemoteDisconnected, ConnectionError)):
        sandbox.post_payment(KEY, BODY, attempt_id="claim-1")
    [effect] = sandbox.effects(KEY)
    assert effect["attempt_id"] == "claim-1"
    assert sandbox.ledger()["requests"][-1]["result"] == "fault:commit_then_drop"
    assert sandbox.payment_by_key(KEY).body["id"] == effect["id"]


def test_delay_before_commit_outlives_the_client_timeout(sandbox: SandboxProc):
    sandbox.set_fault("delay_before_commit", delay_s=2.0)
    with pytest.raises((TimeoutError, socket.timeout)):
        sandbox.post_payment(KEY, BODY, timeout_s=0.5)
    assert sandbox.effects(KEY) == []
    ledger = sandbox.wait_ledger(has_effect(KEY), timeout_s=10)
    assert [r["result"] for r in ledger["requests"]] == ["fault:delay_before_commit"]


def test_error_before_commit_then_success(sandbox: SandboxProc):
    sandbox.set_fault("error_before_commit", key=KEY)
    failed = sandbox.post_payment(KEY, BODY)
    assert (failed.status, failed.body["error"]) == (503, "unavailable")
    assert failed.headers["Retry-After"] == "0"
    assert sandbox.effects(KEY) == []
    assert sandbox.request("GET", "/v1/faults").body == {"faults": []}
    assert sandbox.post_payment(KEY, BODY).status == 201
    assert len(sandbox.effects(KEY)) == 1


def test_fault_for_another_key_and_replays_are_not_faulted(sandbox: SandboxProc):
    assert sandbox.post_payment(KEY, BODY).status == 201
    sandbox.set_fault("error_before_commit", times=2, key="acme/refund/other")
    assert sandbox.post_payment(KEY, BODY).status == 200
    assert sandbox.post_payment("acme/refund/third", BODY).status == 201
    assert sandbox.post_payment("acme/refund/other", BODY).status == 503
    assert sandbox.request("GET", "/v1/faults").body["faults"][0]["times"] == 1
    sandbox.clear_faults()
    assert sandbox.post_payment("acme/refund/other", BODY).status == 201


def test_crash_before_commit_leaves_no_effect(sandbox: SandboxProc):
    sandbox.set_fault("crash_before_commit")
    with pytest.raises((http.client.RemoteDisconnected, ConnectionError)):
        sandbox.post_payment(KEY, BODY)
    assert sandbox.wait_exit(10) == 70
    sandbox.restart()
    ledger = sandbox.ledger()
    assert ledger["effects"] == []
    assert [r["result"] for r in ledger["requests"]] == ["fault:crash_before_commit"]
    assert sandbox.request("GET", "/v1/faults").body == {"faults": []}  # reset on restart


def test_crash_after_commit_keeps_the_effect(sandbox: SandboxProc):
    sandbox.set_fault("crash_after_commit")
    with pytest.raises((http.client.RemoteDisconnected, ConnectionError)):
        sandbox.post_payment(KEY, BODY, attempt_id="claim-1")
    assert sandbox.wait_exit(10) == 71
    sandbox.restart()
    [effect] = sandbox.effects(KEY)
    assert effect["attempt_id"] == "claim-1"
    replayed = sandbox.post_payment(KEY, BODY, attempt_id="claim-2")
    assert (replayed.status, replayed.body["id"]) == (200, effect["id"])


def test_faults_given_at_start_up(tmp_path: Path):
    with SandboxProc(tmp_path / "sandbox.db", faults=["error_before_commit:2"]) as sandbox:
        assert sandbox.post_payment(KEY, BODY).status == 503
        assert sandbox.post_payment(KEY, BODY).status == 503
        assert sandbox.post_payment(KEY, BODY).status == 201


def test_help_shows_the_environment_fallbacks_and_bad_faults_exit_2():
    command = [sys.executable, "-m", "ledger_lab.sandbox"]
    shown = subprocess.run([*command, "--help"], capture_output=True, text=True, timeout=30)
    assert shown.returncode == 0
    assert "LEDGER_SANDBOX_PORT" in shown.stdout and "LEDGER_SANDBOX_DB" in shown.stdout
    bad = subprocess.run([*command, "--fault", "explode"], capture_output=True, text=True,
                         timeout=30)
    assert bad.returncode == 2
    assert "unknown fault mode 'explode'" in bad.stderr
    slow = subprocess.run([*command, "--latency-ms", "-5"], capture_output=True, text=True,
                          timeout=30)
    assert slow.returncode == 2
    assert "--latency-ms: must not be negative: -5" in slow.stderr


def test_latency_is_spent_on_every_payment_request(tmp_path: Path):
    """A bench target with a real API's call time: the time is the server's (measured around
    the call, it can only be longer), and the answer is the same as without it."""
    with SandboxProc(tmp_path / "sandbox.db", latency_ms=150) as sandbox:
        started = time.monotonic()
        assert sandbox.post_payment(KEY, BODY).status == 201
        assert time.monotonic() - started >= 0.15
        assert len(sandbox.effects(KEY)) == 1


def test_an_answer_leaves_in_one_write_and_a_commit_waits_for_no_fsync(tmp_path: Path):
    """The sandbox stands beside the connector on the bench's two cores: its head and body
    written apart reached a client as two pieces (two reads, two parses), and an fsync
    per payment held its one store lock. A commit is in the WAL before the answer, so a
    SIGKILL still loses nothing (test_effects_survive_sigkill_and_restart_on_the_same_port)."""
    from ledger_lab.sandbox.server import SandboxHandler, make_server

    writes: list[int] = []

    class Counted(SandboxHandler):
        def setup(self) -> None:
            super().setup()
            real = self.wfile.write
            self.wfile.write = lambda data: writes.append(len(data)) or real(data)  # type: ignore

    server = make_server("127.0.0.1", 0, tmp_path / "s.db")
    server.RequestHandlerClass = Counted
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        conn = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=10)
        for key in ("acme/refund/one", "acme/refund/two", "acme/refund/one"):
            writes.clear()
            conn.request("POST", "/v1/payments", body=b'{"amount": 1}',
                         headers={"Idempotency-Key": key, "Content-Type": "application/json"})
            answer = conn.getresponse()
            assert answer.status in (200, 201) and answer.read()
            assert len(writes) == 1, writes
        conn.close()
        assert server.store._db.execute("PRAGMA synchronous").fetchone() == (1,)  # NORMAL
        assert server.store._db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    finally:
        server.shutdown()
        server.server_close()
        server.store.close()

"""The processor's state folder on a full disk (a real tmpfs filled to its last page): the
processor stops and says why, nothing is lost, and it resumes when space is freed.

Effects are counted at the payments sandbox (its own ledger); answers on the receipts topic.
The connector is grant-only (the sandbox is not declared deduplicating), so a second
dispatch of a key would show as a second call.
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
import time
from pathlib import Path

import pytest

from ledger_lab.harness.sandbox import SandboxProc
from ledger_lab.harness.stack import TERMINAL, Stack
from ledger_stream.domain import events as ev

pytestmark = pytest.mark.timeout(240)
TMPFS_SIZE = "24m"


@contextlib.contextmanager
def tmpfs(folder: Path):
    folder.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={TMPFS_SIZE}", "tmpfs", str(folder)],
                   check=True, capture_output=True)
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False, capture_output=True)


def fill(folder: Path) -> Path:
    """Write zeros until the file system refuses one more byte; the filler's path."""
    filler = folder / "filler"
    with filler.open("wb", buffering=0) as fh:
        for chunk in (1 << 20, 4096, 1):
            try:
                while True:
                    fh.write(b"\0" * chunk)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC, exc
    return filler


def calls(sandbox: SandboxProc, key: str) -> int:
    return sum(1 for r in sandbox.ledger()["requests"] if r["idempotency_key"] == key)


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root (CI runs as root)")
def test_a_full_state_disk_stops_the_processor_which_says_why_and_loses_nothing(
        ledger_topics, tmp_path: Path, sandbox: SandboxProc) -> None:
    with tmpfs(tmp_path / "state") as state:
        stack = Stack(ledger_topics, tmp_path)
        try:
            stack.connector("http", "--name", "sandbox", "--base-url", sandbox.url)
            before = [stack.submit(f"acme/refund/before-{i}", {"amount": i}, "sandbox")
                      for i in range(10)]
            for intent in before:
                stack.await_key(intent.key, {ev.ReceiptStatus.SUCCEEDED})

            filler = fill(state)
            during = [stack.submit(f"acme/refund/full-{i}", {"amount": i}, "sandbox")
                      for i in range(10)]
            deadline = time.monotonic() + 60
            while stack.processor.alive() and time.monotonic() < deadline:
                time.sleep(0.2)
            assert not stack.processor.alive(), "the processor went on with a full disk"
            assert stack.processor.popen.returncode == 2
            log = stack.processor.tail(30)
            # One line that says why, not a traceback (closing the stores fails too).
            said = [line for line in log.splitlines()
                    if line.startswith("ledger-stream: error: state store failed")]
            assert said and "No space left on device" in said[0], log
            assert "Traceback" not in log, log

            filler.unlink()
            stack.restart_processor(kill=False)
            for intent in before + during:
                receipt = stack.await_key(intent.key, TERMINAL)
                assert receipt.key_status is ev.ReceiptStatus.SUCCEEDED, receipt
                assert calls(sandbox, intent.key) == 1, intent.key
            # And the duplicates of every key get the original answer, with no new call.
            for intent in before + during:
                again = stack.submit(intent.key, {"amount": int(intent.key.rsplit("-", 1)[1])},
                                     "sandbox")
                assert stack.await_answer(again).status is ev.ReceiptStatus.SUCCEEDED
            assert all(calls(sandbox, i.key) == 1 for i in before + during)
        finally:
            stack.close()

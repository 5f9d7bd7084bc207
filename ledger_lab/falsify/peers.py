"""What each peer does with an unknown outcome: the payment applied at the target, its answer
lost (the sandbox's ``commit_then_drop`` fault, scenario 6's), then the agent retries the
same business key, as an agent does after an error.

    python -m ledger_lab.falsify.peers [--out FILE.json]

Each peer (:mod:`ledger_lab.bench.arms.peers_libs`, wired as in the benchmark) meets two
targets:

- ``deduplicating``: the payment carries the key the peer's documentation says to pass
  downstream, and the sandbox deduplicates on it (a Stripe-like API);
- ``not deduplicating``: every call carries a new idempotency key, as at an API without
  idempotency keys (scenario 6b's kind of target, where only an operator can settle).

Judged on the sandbox's own ledger (effects and requests of the run) and on what the peer
answered the retry and kept in its store. The verdicts:

- ``duplicate effect``: two payments for one key;
- ``stops for an operator``: the retry is refused, the key held unresolved in the store;
- ``reports failed``: the retry is answered with the first call's error although the
  payment was made (nothing left for an operator to find as unresolved);
- ``settles by resending``: the retry sent the payment again and the target's own
  deduplication answered it (one effect, the retry succeeds);
- ``settles by lookup``: the retry succeeds with one request (the outcome was looked up).

ledger-stream's own answer to the same case is the falsification matrix's scenario 6 (a
queryable target: settled by lookup) and 6b (no lookup: ``needs_reconciliation``).
Each peer runs in a child process of its own (``--peer``), as the benchmark runs it; the
child arms the fault and reads the sandbox's ledger itself.
"""

from __future__ import annotations

import argparse
import http.client
import json
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ledger_lab.bench.arms.peers_libs import PEER_NAMES, POSTGRES_PEERS, Target, open_peer

TARGETS = {"deduplicating": False, "not deduplicating": True}  # name: per-attempt keys
UNRESOLVED = ("in_flight", "indeterminate", "processing", "PENDING")


def _attempt(peer: Any, key: str) -> tuple[bool, str]:
    """(succeeded, what the agent saw) of one protected call."""
    try:
        peer.call(key, {"amount": 4200, "currency": "EUR"})
    except Exception as exc:  # every error is an answer here: it is what the agent sees
        return False, f"{type(exc).__name__}: {str(exc)[:160]}"
    return True, "payment returned"


def _sandbox(url: str, method: str, path: str, body: Any = None) -> Any:
    """One JSON request to the sandbox's own API (faults, ledger)."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=30)
    try:
        conn.request(method, path, None if body is None else json.dumps(body),
                     {"Content-Type": "application/json"})
        response = conn.getresponse()
        data = json.loads(response.read())
        if response.status != 200:
            raise RuntimeError(f"sandbox {method} {path}: {response.status} {data}")
        return data
    finally:
        conn.close()


def run_peer(name: str, url: str, folder: Path, dsn: str) -> list[dict[str, Any]]:
    """In the child: at each target, the first call (the fault armed), the retry, and what
    the target and the peer's store hold after them. One row per target."""
    target = Target(url)
    peer = open_peer(name, target, folder, dsn, 1)
    rows = []
    try:
        for target_name, per_attempt in TARGETS.items():
            target.per_attempt_keys = per_attempt
            before = _sandbox(url, "GET", "/v1/ledger")
            _sandbox(url, "DELETE", "/v1/faults")
            _sandbox(url, "POST", "/v1/faults", {"mode": "commit_then_drop"})  # next new key
            key = f"unknown-{uuid.uuid4().hex[:10]}"
            first_ok, first = _attempt(peer, key)
            retry_ok, retry = _attempt(peer, key)
            after = _sandbox(url, "GET", "/v1/ledger")
            effects = len(after["effects"]) - len(before["effects"])
            requests = len(after["requests"]) - len(before["requests"])
            state = peer.state(key)
            rows.append({"peer": name, "target": target_name, "effects": effects,
                         "requests": requests, "first_ok": first_ok, "first": first,
                         "retry_ok": retry_ok, "retry": retry, "state": state,
                         "verdict": verdict(effects, requests, retry_ok, state)})
    finally:
        peer.close()
    return rows


def verdict(effects: int, requests: int, retry_ok: bool, state: str) -> str:
    """The outcome class of one run, from the target's ledger and the peer's answers."""
    if effects > 1:
        return "duplicate effect"
    if retry_ok:
        return "settles by resending" if requests > 1 else "settles by lookup"
    if any(word in state for word in UNRESOLVED):
        return "stops for an operator"
    return "reports failed"


def run_all(peers: tuple[str, ...] = PEER_NAMES, postgres: Any = None
            ) -> list[dict[str, Any]]:
    """Every peer against both targets, each in a child process; one row per run.
    ``postgres``: a running server to use (else a throwaway one is started)."""
    from ledger_lab.harness.postgres import PostgresServer
    from ledger_lab.harness.sandbox import SandboxProc

    folder = Path(tempfile.mkdtemp(prefix="ledger-falsify-peers-"))
    sandbox = SandboxProc(folder / "sandbox.db")
    own_pg = postgres is None and any(p in POSTGRES_PEERS for p in peers)
    server = PostgresServer().start() if own_pg else postgres
    rows: list[dict[str, Any]] = []
    try:
        for name in peers:
            dsn = server.new_database() if server and name in POSTGRES_PEERS else ""
            argv = [sys.executable, "-m", "ledger_lab.falsify.peers", "--peer", name,
                    "--url", sandbox.url, "--folder", str(folder / name), "--dsn", dsn]
            done = subprocess.run(argv, capture_output=True, text=True, timeout=300,
                                  check=False)
            if done.returncode != 0:
                rows += [{"peer": name, "target": target, "verdict": "could not run",
                          "error": done.stderr[-2000:]} for target in TARGETS]
                continue
            rows += json.loads(done.stdout.strip().splitlines()[-1])
    finally:
        sandbox.stop()
        if own_pg and server is not None:
            server.remove()
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    """The rows as a Markdown table."""
    lines = ["| peer | target | requests | effects | the retry got | state kept | outcome |",
             "| --- | --- | ---: | ---: | --- | --- | --- |"]
    for r in rows:
        lines.append(f"| {r['peer']} | {r['target']} | {r.get('requests', '-')} | "
                     f"{r.get('effects', '-')} | {r.get('retry', '-')} | "
                     f"{r.get('state', '-')} | {r['verdict']} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ledger_lab.falsify.peers",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--peer", choices=PEER_NAMES, help="(child) run this peer once")
    parser.add_argument("--url")
    parser.add_argument("--folder", type=Path)
    parser.add_argument("--dsn", default="")
    parser.add_argument("--out", type=Path, help="write the rows as JSON here too")
    a = parser.parse_args(argv)
    if a.peer:
        if not a.url or a.folder is None:
            parser.error("--peer needs --url and --folder")
        print(json.dumps(run_peer(a.peer, a.url, a.folder, a.dsn)))
        return 0
    rows = run_all()
    if a.out:
        a.out.write_text(json.dumps(rows, indent=2) + "\n")
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())

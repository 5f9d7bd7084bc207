"""``ledger-stream evidence KEY``: everything known about a key as one redacted JSON document
(ledger_stream/history/evidence.py), with, when asked, the workflow side (the checkpoints
around each step that asked for the key, from the thread's checkpointer opened read-only),
the target side (the connector's lookup by key, run now) and a Markdown report."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ledger_stream.cli.checkpointer import DSN_HELP, open_checkpointer, postgres_dsn
from ledger_stream.cli.common import CliError, add_common_flags, seconds
from ledger_stream.cli.dry_run import load_instance
from ledger_stream.cli.inspect_cmd import ask, source_flags
from ledger_stream.connector.target import Target

WORKFLOW_REDACTION = ("channel values and pending writes replaced by their type, size "
                      "and an HMAC-SHA256 under a key drawn for this document alone (equal "
                      "digests: equal values, within this document only); metadata other "
                      "than source, step and parents shown by its keys' names")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    evidence = subparsers.add_parser(
        "evidence", help="everything known about a key, as one redacted JSON file",
        description="Write KEY's evidence for an incident review: the raw events with "
        "topic, partition and offset (in log order), the timeline, receipts, alerts, "
        "operator decisions and their audit records. Arguments, payloads and connector "
        "error texts are replaced by their length, approval signatures dropped. From "
        "the view or the topics, as inspect. With --checkpointer, the workflow side: per "
        "thread the key's intents name, the graph and version, the thread config, the "
        "checkpoints before and after the step, pending tasks and writes (values as type, "
        "size and a digest keyed for this document only). With --target, the target "
        "side: the connector's lookup by key, run now, beside the ledger's receipt (or "
        "'cannot be queried'). Exit status 1 when the ledger has no record of the key.")
    evidence.add_argument("key", metavar="KEY", help="operation key")
    evidence.add_argument("--out", metavar="FILE", help="write here instead of stdout")
    evidence.add_argument("--checkpointer", metavar="DSN",
                          help=f"the threads' LangGraph checkpointer: {DSN_HELP}")
    evidence.add_argument("--target", metavar="URL|MODULE:ATTR",
                          help="the target to look the key up at: an http(s) lookup URL "
                          "holding {key} (e.g. http://payments/v1/payments/by-key/{key}; the "
                          "key is one encoded path segment, or a query value after '?'), "
                          "or a connector Target (or a function of no arguments returning "
                          "one)")
    evidence.add_argument("--lookup-timeout", type=seconds(), default=10.0, metavar="S",
                          help="seconds the target's lookup may take (default 10)")
    evidence.add_argument("--report", metavar="FILE", help="also write a Markdown report "
                          "with the key's picture")
    source_flags(evidence)
    add_common_flags(evidence)
    evidence.set_defaults(handler=_evidence)


def _evidence(args: argparse.Namespace) -> int:
    found = ask(args, lambda client: client.evidence(args.key, args.wait))
    if found is None:
        print(f"no record of {args.key} in the ledger", file=sys.stderr)
        return 1
    if args.checkpointer:
        found["workflow"] = _workflow(args.checkpointer, found)
    if args.target:
        from ledger_stream.history.target_side import ledger_receipt_ids, target_side

        target = _target(args.target, _target_name(found))
        try:
            found["target_record"] = target_side(
                target, args.key, ledger_receipt_ids(found["receipts"]), args.lookup_timeout,
                found.get("state"))
        finally:
            target.close()
    records = sum(len(topic["records"]) for topic in found["topics"].values())
    text = json.dumps(found, indent=2, sort_keys=True)
    if args.out:
        _write(args.out, text + "\n")
        print(f"wrote {args.out} ({records} records)", file=sys.stderr)
    else:
        print(text)
    if args.report:
        from ledger_stream.history.report import markdown

        _write(args.report, markdown(found))
        print(f"wrote {args.report}", file=sys.stderr)
    return 0


def _workflow(dsn: str, doc: dict[str, Any]) -> dict[str, Any]:
    from ledger_stream.history.checkpoints import workflow_side

    intents = [row for row in doc["timeline"] if row.get("event") == "Intent"]
    with open_checkpointer(dsn) as saver:
        threads = workflow_side(saver, intents)
    # The DSN is not repeated: it may hold a password.
    return {"checkpointer": "postgresql" if postgres_dsn(dsn) else "sqlite",
            "redaction": WORKFLOW_REDACTION, "threads": threads}


def _target_name(doc: dict[str, Any]) -> str:
    """The target the key's intents name (for an HTTP lookup URL, which names none)."""
    for record in doc["topics"].get("intents", {}).get("records", []):
        if (record.get("event") or {}).get("target"):
            return str(record["event"]["target"])
    return "http"


def _target(spec: str, name: str) -> Target:
    """The Target ``spec`` names: an HTTP lookup URL holding {key} (named ``name``), or
    MODULE:ATTR."""
    if spec.startswith(("http://", "https://")):
        from urllib.parse import urlsplit

        from connectors.http import HttpTarget

        parts = urlsplit(spec)
        if "@" in parts.netloc:  # never repeated: a token there would be printed
            raise CliError("--target: the lookup URL holds credentials (user:password@); "
                           "give a URL without them")
        path = parts.path + (f"?{parts.query}" if parts.query else "")
        try:
            return HttpTarget(name, f"{parts.scheme}://{parts.netloc}", lookup_path=path,
                              lookup_key_encoding="query" if "?" in path.split("{key}")[0]
                              else "segment")
        except ValueError as exc:
            raise CliError(f"--target {spec!r}: {exc}") from exc
    target: Target = load_instance(spec, "--target", Target, "a connector Target",
                                   quote_errors=False)
    return target


def _write(path: str, text: str) -> None:
    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise CliError(f"cannot write {path}: {exc}") from exc

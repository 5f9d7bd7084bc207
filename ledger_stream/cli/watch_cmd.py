"""``ledger-stream watch sandbox|postgres|smtp``: report every effect the target records to
the ledger, so effects made around it raise alerts (ledger_stream/watch/)."""

from __future__ import annotations

import argparse
import signal
import threading
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ledger_stream.cli.common import CliError, add_common_flags, seconds, settings_from, shown

NEEDS = {"sandbox": ("base_url",), "postgres": ("dsn", "table"), "smtp": ("maildir",)}
FLAG = {"base_url": "--base-url", "dsn": "--dsn", "table": "--table", "maildir": "--maildir"}

MAX_INTERVAL_S = 86_400.0  # --interval at most a day


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "watch", help="watch a target's own effects and report them to the ledger",
        description="Read the target's own record of its effects and report each one to "
        "the ledger as a lookup by key. An effect no intent reserved raises "
        "effect_without_intent, a second effect for a key duplicate_effect, within "
        "seconds, even when no connector saw it. Targets: sandbox (the payments sandbox's "
        "ledger, --base-url), postgres (the table the effect SQL writes, --dsn --table, "
        "read by an increasing id), smtp (the recipients' Maildir, --maildir). Runs until "
        "SIGTERM or Ctrl-C.")
    parser.add_argument("target", choices=tuple(NEEDS), help="the kind of target")
    parser.add_argument("--name", required=True, help="the target's name, as the "
                        "connector's --name and the intents' target: an effect found is "
                        "a key's own only at its target")
    parser.add_argument("--key-template", default=None, metavar="TEMPLATE",
                        help="the operation key of an effect made around the ledger, from "
                        "its body (a row's columns; a mail's to, subject, from): e.g. "
                        "'acme/refund/{invoice}'")
    parser.add_argument("--interval", type=seconds(most=MAX_INTERVAL_S), default=1.0,
                        help="seconds between polls")
    sandbox = parser.add_argument_group("sandbox")
    sandbox.add_argument("--base-url", help="the sandbox's URL; user:password@ in it is "
                         "sent as basic auth, as by connector http")
    pg = parser.add_argument_group("postgres")
    pg.add_argument("--dsn", help="the database the effects are written to")
    pg.add_argument("--table", help="the table the effect SQL writes (schema.table allowed)")
    pg.add_argument("--id-column", default="id", help="an increasing id (default: id)")
    pg.add_argument("--key-column", default="ledger_key",
                    help="the column filled from %%(ledger_key)s (default: ledger_key)")
    pg.add_argument("--receipt-column", default="ledger_receipt_id",
                    help="the column filled from %%(ledger_receipt_id)s "
                    "(default: ledger_receipt_id)")
    smtp = parser.add_argument_group("smtp")
    smtp.add_argument("--maildir", type=Path, help="the recipients' mailbox (Maildir)")
    add_common_flags(parser)
    parser.set_defaults(handler=_run)


def _source(args: argparse.Namespace) -> Any:
    from ledger_stream.connector.redaction import url_port
    from ledger_stream.watch.sources import MaildirEffects, PostgresEffects, sandbox_effects

    if not args.name.strip():  # the connector refuses it too: no intent names that target
        raise CliError("--name must name the target (as the connector's --name)")
    missing = [FLAG[need] for need in NEEDS[args.target] if not getattr(args, need)]
    if missing:
        raise CliError(f"watch {args.target} needs {' and '.join(missing)}")
    if args.target == "sandbox":
        parts = urlsplit(args.base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            # as `connector http` refuses it; before, every poll failed, forever
            raise CliError("--base-url must be http(s)://HOST[:PORT], got "
                           f"{shown(args.base_url)}")
        try:
            url_port(parts)  # before, "nonnumeric port: 'PASSWORD'" every poll
        except ValueError as exc:
            raise CliError(f"--base-url: {exc}") from None
        return lambda: sandbox_effects(args.base_url)
    if args.target == "postgres":
        import psycopg

        from connectors.postgres import describe

        source = PostgresEffects(args.dsn, args.table, id_column=args.id_column,
                                 key_column=args.key_column,
                                 receipt_column=args.receipt_column)
        try:
            source.check()
        except (ValueError, psycopg.Error) as exc:
            # psycopg's message can quote the DSN, password included: what the connector
            # says of a failed connection, never the server's text or the DSN
            said = exc if isinstance(exc, ValueError) else describe(exc)
            raise CliError(f"watch postgres: {said}") from exc
        return source
    if not (args.maildir / "cur").is_dir() or not (args.maildir / "new").is_dir():
        raise CliError(f"--maildir {args.maildir}: not a Maildir (no cur/ and new/)")
    return MaildirEffects(args.maildir)


def _run(args: argparse.Namespace) -> int:
    from ledger_stream.kafka.bootstrap import resolve_bootstrap
    from ledger_stream.kafka.exceptions import KafkaSetupError
    from ledger_stream.kafka.producer import EventProducer
    from ledger_stream.serde import make_codec
    from ledger_stream.watch import Watcher
    from ledger_stream.watch.watcher import check_template

    if args.key_template is not None:  # else every effect lands under unmapped/...
        try:
            check_template(args.key_template)
        except ValueError as exc:
            raise CliError(str(exc)) from exc
    source = _source(args)
    settings = settings_from(args)
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    try:
        bootstrap = resolve_bootstrap(settings)
    except KafkaSetupError as exc:
        raise CliError(str(exc)) from exc
    codec = make_codec(settings.connection.schema_registry_url)
    producer = EventProducer(settings, bootstrap, codec)
    # A relay sends a mail twice if asked twice; the sandbox and the receipts table fence.
    watcher = Watcher(args.name, source, producer, args.key_template,
                      deduplicates=args.target != "smtp")
    try:
        watcher.run(stop, args.interval)
    finally:
        producer.close()
    return 0

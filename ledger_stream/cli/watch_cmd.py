"""``ledger-stream watch sandbox``: report every effect the target records to the ledger, so
effects made around it raise alerts (ledger_stream/watch/)."""

from __future__ import annotations

import argparse
import signal
import threading

from ledger_stream.cli.common import CliError, add_common_flags, settings_from


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "watch", help="watch a target's own effects and report them to the ledger",
        description="Read the target's own record of its effects and report each one to "
        "the ledger as a lookup by key. An effect no intent reserved raises "
        "effect_without_intent, a second effect for a key duplicate_effect, within "
        "seconds, even when no connector saw it. Runs until SIGTERM or Ctrl-C.")
    parser.add_argument("target", choices=("sandbox",), help="the kind of target")
    parser.add_argument("--base-url", required=True, help="the target's URL")
    parser.add_argument("--name", default="sandbox", help="the target's name (as the "
                        "connector's --name)")
    parser.add_argument("--key-template", default=None, metavar="TEMPLATE",
                        help="the operation key of an effect whose idempotency key is not "
                        "one, from its body: e.g. 'acme/refund/{invoice}'")
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between polls")
    add_common_flags(parser)
    parser.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    from ledger_stream.kafka.bootstrap import resolve_bootstrap
    from ledger_stream.kafka.producer import EventProducer
    from ledger_stream.serde import make_codec
    from ledger_stream.watch import Watcher
    from ledger_stream.watch.sources import sandbox_effects

    if args.interval <= 0:
        raise CliError("--interval must be positive")
    settings = settings_from(args)
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    producer = EventProducer(settings, resolve_bootstrap(settings),
                             make_codec(settings.schema_registry_url))
    watcher = Watcher(args.name, lambda: sandbox_effects(args.base_url), producer,
                      args.key_template)
    try:
        watcher.run(stop, args.interval)
    finally:
        producer.close()
    return 0

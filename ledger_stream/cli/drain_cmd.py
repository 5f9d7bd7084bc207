"""``ledger-stream drain --graph G --version V``: the keys in flight for one workflow
version, and ``--hold`` / ``--release`` of its new intents (a freeze by workflow version).

Exit status for scripts: 0 when no key of the version is in flight (its held keys, which
wait for the unfreeze, are listed apart and do not count), 1 when some are or the
processors have not decided every recorded intent within ``--lag-wait`` (an intent of the
version not decided yet is in no changelog row), 2 on an error (nothing could be said).
"""

from __future__ import annotations

import argparse
import sys

from ledger_stream.cli.common import (
    CliError,
    add_common_flags,
    cell,
    iso_ms,
    kafka_failure,
    seconds,
    settings_from,
)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    drain = subparsers.add_parser(
        "drain", help="the keys in flight for a workflow version; hold its new intents",
        description="List the keys in flight (reserved, dispatched, reconciling, waiting "
        "for an operator, held) whose intent came from workflow --graph at --version, "
        "from each key's latest row in the processors' changelog. With --hold, first "
        "freeze that version: its new intents are recorded and answered 'held: frozen', "
        "not dispatched, while other versions pass and its keys in flight finish; "
        "--release lifts the hold and dispatches the held intents, in order. Who holds "
        "or releases (--operator) is written to the audit topic first. Before reading, it "
        "waits up to --lag-wait seconds for the processors to decide every recorded "
        "intent. Held keys wait for the release and are listed apart. Exit status 0 "
        "when nothing of the version is in flight (held keys aside), 1 when some keys "
        "are or the processors lag, 2 on an error.")
    drain.add_argument("--graph", required=True, metavar="G", help="the graph id")
    drain.add_argument("--version", required=True, metavar="V",
                       help="the workflow (graph) version")
    hold = drain.add_mutually_exclusive_group()
    hold.add_argument("--hold", action="store_true",
                      help="hold new intents of this version (a freeze by version)")
    hold.add_argument("--release", action="store_true",
                      help="lift the hold: its held intents are dispatched, in order")
    drain.add_argument("--reason", default="", help="why (in the audit trail)")
    drain.add_argument("--operator", help="who decides, for the audit topic (env: "
                       "LEDGER_OPERATOR; default: the OS user)")
    drain.add_argument("--event-id", default="", help="id of the hold or release command "
                       "(default: new); a retry with the same id changes nothing more")
    drain.add_argument("--wait", type=seconds(zero=True), default=10.0, metavar="S",
                       help="seconds to wait for every processor to apply the hold or "
                       "release (default 10)")
    drain.add_argument("--group", metavar="NAME", help="the processors' consumer group "
                       "(env: LEDGER_CONSUMER_GROUP)")
    drain.add_argument("--lag-wait", type=seconds(zero=True), default=30.0, metavar="S",
                       help="seconds to wait for the processors to decide every recorded "
                       "intent before reading the changelog (default 30); still behind: "
                       "not drained (exit 1)")
    drain.add_argument("--json", action="store_true", help="one JSON object per key")
    add_common_flags(drain)
    drain.set_defaults(handler=_drain)


def _drain(args: argparse.Namespace) -> int:
    from confluent_kafka import KafkaException

    from ledger_stream.kafka.bootstrap import resolve_bootstrap
    from ledger_stream.kafka.exceptions import KafkaSetupError
    from ledger_stream.operate import drain
    from ledger_stream.upgrade.check import LedgerBehind, caught_up
    from ledger_stream.upgrade.ledger import intent_ends, undecided

    if not args.graph or not args.version:
        raise CliError("--graph and --version must not be empty")
    settings = settings_from(args, consumer_group=args.group)
    try:
        bootstrap = resolve_bootstrap(settings)
        if args.hold or args.release:
            _contain(args, settings, bootstrap)
        # An intent of the version recorded but not decided is in no changelog row yet. Only
        # those recorded before now: under traffic the processors' lag is never 0.
        ends = intent_ends(settings, bootstrap)
        caught_up(lambda: undecided(settings, bootstrap, ends), max(args.lag_wait, 0.0),
                  lambda line: print(line, file=sys.stderr, flush=True))
        found = drain.in_flight(settings, bootstrap, args.graph, args.version)
    except LedgerBehind as exc:
        print(f"not drained: {exc}", file=sys.stderr)
        return 1
    except KafkaSetupError as exc:
        raise CliError(str(exc)) from exc
    except KafkaException as exc:
        raise kafka_failure(exc, "cannot read the changelog") from exc
    for item, flying in [(i, True) for i in found.in_flight] + [(i, False) for i in found.held]:
        print(drain.as_json(item, flying) if args.json else
              f"{cell(item.key)}\t{item.phase}\tattempt {item.attempt}\t"
              f"since {iso_ms(item.since_ms)}\t{cell(item.detail or None)}")
    what = f"{args.graph} version {args.version}"
    print(f"{len(found.in_flight)} key(s) in flight for {what}",
          file=sys.stderr if args.json else sys.stdout)
    if found.held:
        print(f"{len(found.held)} key(s) held for {what}: they wait for the release",
              file=sys.stderr if args.json else sys.stdout)
    if found.unreadable:
        raise CliError(f"{len(found.unreadable)} changelog row(s) did not decode (e.g. "
                       f"{found.unreadable[0]!r}): whether they are in flight is unknown")
    return 1 if found.in_flight else 0


def _contain(args: argparse.Namespace, settings: object, bootstrap: str) -> None:
    """Send the hold (a freeze by workflow version) or its release, and wait for every
    partition's processor to apply it; CliError when that is not certain."""
    from ledger_stream.config import Settings
    from ledger_stream.domain import events as ev
    from ledger_stream.kafka.exceptions import DeliveryFailed
    from ledger_stream.operate import Actor, AuditNotWritten, containment
    from ledger_stream.serde import make_codec

    assert isinstance(settings, Settings)
    event_id = args.event_id or containment.new_event_id()
    command = "hold" if args.hold else "release"
    again = f"run it again with --event-id {event_id}"
    try:
        event, offsets = containment.send(
            settings, bootstrap, make_codec(settings.connection.schema_registry_url),
            action="", tenant="", frozen=args.hold, mode=ev.FreezeMode.HOLD,
            reason=args.reason, actor=Actor.from_cli(args.operator), event_id=event_id,
            workflow=(args.graph, args.version))
        late = containment.not_applied(settings, bootstrap, offsets, max(args.wait, 0.0))
    except containment.ContainmentRefused as exc:
        raise CliError(str(exc)) from exc
    except (AuditNotWritten, DeliveryFailed) as exc:
        raise CliError(f"{command} not done: {exc}; {again}") from exc
    if late:
        raise CliError(f"the {command} is recorded (event {event.event_id}) but the "
                       f"processors of partition(s) {', '.join(map(str, late))} have not "
                       f"applied it within {args.wait:g} s; {again} to wait again")
    print(f"{args.graph} version {args.version}: {'held' if args.hold else 'released'}, "
          f"event {event.event_id}", file=sys.stderr)

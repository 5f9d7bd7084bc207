"""``ledger-stream freeze|unfreeze ACTION`` and ``ledger-stream freezes``: containment.

A freeze holds every new dispatch of an action (for one tenant, or every tenant): intents
are still recorded and answered ``held: frozen``, retries wait too, and ``unfreeze``
releases them in order. Freezes are events on the attempts topic (operate/containment.py).
"""

from __future__ import annotations

import argparse
import json
import sys

from ledger_stream.cli.common import (
    CliError,
    add_common_flags,
    iso_ms,
    kafka_failure,
    seconds,
    settings_from,
)
from ledger_stream.domain import events as ev

MODES = tuple(m.value for m in ev.FreezeMode)

MAX_WAIT_S = 3600.0  # --wait at most an hour


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    freeze = subparsers.add_parser(
        "freeze", help="hold every new dispatch of an action (containment)",
        description="Freeze ACTION for --tenant (default: every tenant). In hold mode, no "
        "new dispatch leaves the ledger for it: new intents are recorded and answered "
        "'held: frozen', retries and redispatches wait too, until `unfreeze`. In approval "
        "mode, every new intent of the action needs a valid approval instead. A dispatch "
        "sent before the freeze is not recalled. Freezing a frozen action again updates "
        "its mode and reason. The freeze is an event on the attempts topic, kept across "
        "restarts; who froze it (--operator) is written to the audit topic first.")
    _scope_flags(freeze)
    freeze.add_argument("--mode", choices=MODES, default="hold",
                        help="hold (default): hold dispatches; approval: require approval")
    freeze.add_argument("--reason", required=True,
                        help="why (in the audit trail; no payment details)")
    freeze.set_defaults(handler=_freeze, frozen=True)

    unfreeze = subparsers.add_parser(
        "unfreeze", help="release an action's held dispatches, in order",
        description="Unfreeze ACTION for --tenant (default: the freeze for every tenant): "
        "each partition's processor dispatches the keys it held, in the order it held "
        "them. A key that another freeze still covers stays held under that one. "
        "Unfreezing an action that is not frozen changes nothing.")
    _scope_flags(unfreeze)
    unfreeze.add_argument("--reason", default="", help="why (in the audit trail)")
    unfreeze.set_defaults(handler=_freeze, frozen=False, mode="hold")

    freezes = subparsers.add_parser(
        "freezes", help="list the freezes in force",
        description="The freezes in force, as the attempts topic records them (read from "
        "its partition 0, where every freeze has a copy); with --history every freeze and "
        "unfreeze still in the log.")
    freezes.add_argument("--history", action="store_true",
                         help="every freeze and unfreeze, oldest first")
    freezes.add_argument("--json", action="store_true", help="one JSON object per line")
    add_common_flags(freezes)
    freezes.set_defaults(handler=_list)


def _scope_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", metavar="ACTION", help="the action, e.g. refund")
    parser.add_argument("--tenant", default="", metavar="T",
                        help="only this tenant's keys (default: every tenant)")
    parser.add_argument("--operator", help="who decides, for the audit topic (env: "
                        "LEDGER_OPERATOR; default: the OS user)")
    parser.add_argument("--event-id", default="",
                        help="id of this command (default: new): a processor that applied "
                        "this command with this id ignores it again, so a retry cannot "
                        "undo a later freeze or unfreeze")
    parser.add_argument("--wait", type=seconds(zero=True, most=MAX_WAIT_S), default=10.0,
                        metavar="S",
                        help="seconds to wait for every partition's processor to apply it "
                        "(default 10; 0: do not wait)")
    parser.add_argument("--group", metavar="NAME", help="the processors' consumer group "
                        "(env: LEDGER_CONSUMER_GROUP)")
    add_common_flags(parser)


def _freeze(args: argparse.Namespace) -> int:
    from confluent_kafka import KafkaException

    from ledger_stream.kafka.bootstrap import resolve_bootstrap
    from ledger_stream.kafka.exceptions import DeliveryFailed, KafkaSetupError, kafka_error_text
    from ledger_stream.operate import Actor, AuditNotWritten, containment
    from ledger_stream.serde import make_codec

    settings = settings_from(args, consumer_group=args.group)
    try:
        bootstrap = resolve_bootstrap(settings)
    except KafkaSetupError as exc:
        raise CliError(str(exc)) from exc
    event_id = args.event_id or containment.new_event_id()
    # Run again with this id, the command changes nothing where it was applied already:
    # every processor ignores a repeat of a command it applied.
    again = f"run it again with --event-id {event_id}"
    command = "freeze" if args.frozen else "unfreeze"
    try:
        event, offsets = containment.send(
            settings, bootstrap, make_codec(settings.connection.schema_registry_url),
            action=args.action, tenant=args.tenant, frozen=args.frozen,
            mode=ev.FreezeMode(args.mode), reason=args.reason,
            actor=Actor.from_cli(args.operator), event_id=event_id)
    except containment.ContainmentRefused as exc:
        raise CliError(str(exc)) from exc
    except AuditNotWritten as exc:
        raise CliError(f"{command} not done: {exc}; {again}") from exc
    except (KafkaSetupError, DeliveryFailed) as exc:
        raise CliError(f"{command} not done: {exc}; {again}") from exc
    except KafkaException as exc:
        failure = kafka_failure(exc, f"cannot reach Kafka at {bootstrap}")
        raise CliError(f"{failure}; {again}") from exc
    scope = f"{args.tenant or 'every tenant'}/{args.action}"
    what = f"frozen ({args.mode})" if args.frozen else "unfrozen"
    try:
        late = containment.not_applied(settings, bootstrap, offsets, args.wait) \
            if args.wait else []
    except (KafkaSetupError, KafkaException) as exc:
        text = kafka_error_text(exc) if isinstance(exc, KafkaException) else str(exc)
        raise CliError(f"the {command} is recorded (event {event.event_id}), but whether "
                       f"the processors applied it cannot be read: {text}") from exc
    retried = (" A retry: a processor that applied this command before ignores it; "
               "`ledger-stream freezes` shows what is in force.") if args.event_id else ""
    if late:
        print(f"{scope}: {what} is recorded in {len(offsets)} partition(s), event "
              f"{event.event_id}, but the processors of partition(s) "
              f"{', '.join(map(str, late))} have not applied it within {args.wait:g} s "
              f"(group {settings.processor.consumer_group}): it takes effect when they read it."
              f"{retried}")
        return 1
    applied = "in force" if args.wait else "recorded"
    print(f"{scope}: {what} in {len(offsets)} partition(s), {applied}, event "
          f"{event.event_id}.{retried}")
    return 0


def _list(args: argparse.Namespace) -> int:
    from confluent_kafka import KafkaException

    from ledger_stream.kafka.bootstrap import resolve_bootstrap
    from ledger_stream.kafka.exceptions import KafkaSetupError
    from ledger_stream.operate import containment
    from ledger_stream.serde import make_codec

    settings = settings_from(args)
    try:
        bootstrap = resolve_bootstrap(settings)
        records = containment.log(settings, bootstrap,
                                  make_codec(settings.connection.schema_registry_url))
    except KafkaSetupError as exc:
        raise CliError(str(exc)) from exc
    except KafkaException as exc:
        raise kafka_failure(exc, f"cannot read the freezes from Kafka at {bootstrap}") \
            from exc
    ignored = containment.ignored(records)
    shown = records if args.history else containment.active(records, ignored)
    if not args.json:
        print("at\tscope\tstate\tmode\toperator\treason\tevent_id")
    for record in shown:
        e = record.event
        row = {"at": iso_ms(record.timestamp_ms), "action": e.action, "tenant": e.tenant,
               "scope": record.scope, "frozen": e.frozen, "mode": e.mode.value,
               "operator": e.operator, "reason": e.reason, "event_id": e.event_id,
               "offset": record.offset, "ignored": ignored.get(record.offset, "")}
        if args.json:
            print(json.dumps(row))
        else:
            state = "frozen" if e.frozen else "unfrozen"
            if row["ignored"]:
                state += f" (ignored: {row['ignored']})"
            print(f"{row['at']}\t{record.scope}\t{state}\t{e.mode.value}\t{e.operator}\t"
                  f"{e.reason}\t{e.event_id}")
    print(f"{len(shown)} {'record(s)' if args.history else 'freeze(s) in force'}",
          file=sys.stderr)
    return 0

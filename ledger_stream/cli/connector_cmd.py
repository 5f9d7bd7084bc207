"""``ledger-stream connector http|postgres|smtp``: apply dispatched effects to one target."""

from __future__ import annotations

import argparse
import threading
from collections.abc import Callable
from typing import Any

from ledger_stream.cli.common import (
    CliError,
    add_common_flags,
    add_metrics_host_flag,
    mail_address,
    port_or_off,
    seconds,
    settings_from,
    tcp_port,
)
from ledger_stream.config import Settings
from ledger_stream.connector.target import Target


def _protocol_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("protocol options")
    group.add_argument("--name", help="target name, as intents name it "
                       "(env: LEDGER_CONNECTOR_NAME; required)")
    group.add_argument("--lease-ms", type=int, help="lease asked for each attempt "
                       "(env: LEDGER_CONNECTOR_LEASE_MS; default 30000)")
    group.add_argument("--call-timeout", type=seconds(), help="seconds one call to the target "
                       "may take (env: LEDGER_CONNECTOR_CALL_TIMEOUT_S; default 10)")
    group.add_argument("--record-margin", type=seconds(zero=True),
                       help="seconds kept in the lease to "
                       "record the outcome (env: LEDGER_CONNECTOR_RECORD_MARGIN_S; default 2)")
    group.add_argument("--lookup-delay", type=seconds(zero=True),
                       help="the target's consistency window "
                       "before a lookup (env: LEDGER_CONNECTOR_LOOKUP_DELAY_S; default 0)")
    group.add_argument("--instance-id", help="this instance's id in claims "
                       "(env: LEDGER_CONNECTOR_INSTANCE_ID)")
    group.add_argument("--metrics-port", type=port_or_off, metavar="PORT",
                       help="Prometheus /metrics port, 0 for any free port (logged), off for "
                       "none (env: LEDGER_CONNECTOR_METRICS_PORT; default off)")
    add_metrics_host_flag(group)
    group.add_argument("--max-in-flight", type=int, help="dispatches handled at once by this "
                       "instance (env: LEDGER_CONNECTOR_MAX_IN_FLIGHT; default 256)")
    group.add_argument("--fast-path", action="store_true", default=None,
                       help="call before the grant arrives, for live dispatches only; needs a "
                       "target that deduplicates (env: LEDGER_CONNECTOR_FAST_PATH; default off)")
    group.add_argument("--lookup-patience", type=seconds(zero=True),
                       help="seconds a failing lookup is "
                       "retried before the key goes to an operator "
                       "(env: LEDGER_CONNECTOR_LOOKUP_PATIENCE_S; default 30)")


HTTP_OUTCOMES = """\
outcome of a call (bounded in all by --call-timeout: connect, send, response):
  nothing sent (refused, DNS, connect timeout,   not_applied
    deadline before sending)
  after sending (read timeout, dropped, deadline) unknown: looked up by key
  2xx with the id at --id-field                   succeeded
  2xx without it                                  unknown
  a status declared with a --*-status flag        as declared
  other 4xx                                       failed (final)
  408, 429                                        unknown: transient, and HTTP does not
                                                  promise they come before processing
  5xx, 3xx                                        unknown: the API (or a proxy that
                                                  forwarded the request) may have committed
a wrong not_applied can cost a second effect: declare statuses only from the API's docs.
"""


def _checked(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """An argparse ``type`` whose ValueError message becomes the flag's error message."""

    def convert(text: str) -> Any:
        try:
            return parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from exc

    return convert


def _http_flags(parser: argparse.ArgumentParser) -> None:
    from connectors import http as target

    group = parser.add_argument_group("HTTP options")
    group.add_argument("--base-url", required=True, metavar="URL",
                       help="http(s)://[user:password@]host[:port][/prefix] of the API; "
                       "user:password is sent as basic auth (required)")
    group.add_argument("--apply-path", default="/v1/payments", metavar="PATH",
                       type=_checked(target.check_path),
                       help="POST path of the effect (default: %(default)s)")
    group.add_argument("--lookup-path", default="/v1/payments/by-key/{key}", metavar="TEMPLATE",
                       type=_checked(target.check_lookup_template),
                       help="GET path of the lookup by key; must contain {key} "
                       "(default: %(default)s)")
    group.add_argument("--lookup-key-encoding", default="segment", choices=target.KEY_ENCODINGS,
                       help="how {key} is encoded: segment (/ becomes %%2F), path (/ kept as a "
                       "separator), query (a query value, space as +) (default: %(default)s)")
    group.add_argument("--no-lookup", action="store_true", help="the API has no lookup by key: "
                       "unknown outcomes go to an operator (default: off)")
    group.add_argument("--deduplicates", action="store_true",
                       help="the API itself refuses a second effect for one Idempotency-Key "
                       "and returns the original response; declare only if the API documents "
                       "it. Enables calls before the grant and resends after a lookup finds "
                       "nothing (default: off)")
    group.add_argument("--id-field", default="id", metavar="PATH",
                       type=_checked(target.check_id_field),
                       help="dotted path to the receipt id in a 2xx JSON body, e.g. "
                       "data.payment.id; a digit indexes a list (default: %(default)s)")
    statuses = _checked(target.parse_statuses)
    for flag, meaning in (
            ("--not-applied-status", "mean the API did not process the request (not_applied, "
             "retried with the same key), e.g. 429,503"),
            ("--unknown-status", "mean the outcome is unknown (looked up by key), e.g. 409 "
             "for an API that answers it while a request with the key is in progress"),
            ("--failed-status", "are final refusals with no effect (failed), e.g. 501")):
        group.add_argument(flag, action="append", default=[], type=statuses, metavar="CODES",
                           help=f"HTTP statuses (comma-separated, repeatable) that {meaning}; "
                           "only as the API documents (default: none)")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "connector", help="run a connector: apply dispatched effects to a target",
        description="Consume ledger.dispatch, claim each attempt, call the target only on "
        "the processor's grant (or at once for targets that deduplicate by key), report "
        "outcomes, and reconcile unknown outcomes by looking the key up.")
    kinds = parser.add_subparsers(dest="kind", metavar="KIND", required=True)

    http = kinds.add_parser(
        "http", help="an HTTP API with an Idempotency-Key header",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="POST each effect with the operation key as Idempotency-Key and the "
        "attempt id as X-Attempt-Id;\nlook an unknown outcome up by key with a GET.",
        epilog=HTTP_OUTCOMES)
    _http_flags(http)

    pg = kinds.add_parser("postgres", help="run SQL and a unique receipt row in one transaction")
    pg.add_argument("--dsn", help="libpq DSN (env: LEDGER_CONNECTOR_DSN)")
    pg.add_argument("--effect-sql", required=True,
                    help="SQL with %%(arg)s placeholders filled from the material args")

    smtp = kinds.add_parser("smtp", help="send mail; no lookup, so unknowns go to an operator")
    smtp.add_argument("--smtp-host", default="127.0.0.1", help="SMTP server host")
    smtp.add_argument("--smtp-port", type=tcp_port, default=25,
                      help="SMTP server port, 1-65535 (default: %(default)s)")
    smtp.add_argument("--from", dest="from_addr", default="ledger@localhost", type=mail_address,
                      help="sender address, local@domain (default: %(default)s)")

    for kind in (http, pg, smtp):
        _protocol_flags(kind)
        add_common_flags(kind)
        kind.set_defaults(handler=_run)


def build_target(args: argparse.Namespace, settings: Settings,
                 stop: threading.Event | None = None) -> Target | None:
    """The target the flags describe, ready to use; None when ``stop`` was set while
    waiting for it (a PostgreSQL database that is down at start-up is waited for)."""
    name = settings.connector.name
    if not name:
        raise CliError("--name (or LEDGER_CONNECTOR_NAME) is required")
    if args.kind == "http":
        from connectors.http import HttpTarget

        return HttpTarget(
            name, args.base_url, args.apply_path, None if args.no_lookup else args.lookup_path,
            deduplicates=args.deduplicates, id_field=args.id_field,
            lookup_key_encoding=args.lookup_key_encoding,
            not_applied_statuses=frozenset().union(*args.not_applied_status),
            failed_statuses=frozenset().union(*args.failed_status),
            unknown_statuses=frozenset().union(*args.unknown_status))
    if args.kind == "postgres":
        from connectors.postgres import PostgresTarget

        if settings.connector.dsn is None:
            raise CliError("--dsn (or LEDGER_CONNECTOR_DSN) is required")
        from connectors.postgres import PostgresRejected

        target = PostgresTarget(name=name, dsn=settings.connector.dsn.get_secret_value(),
                                effect_sql=args.effect_sql)
        try:
            ready = target.wait_for_schema(stop or threading.Event())
        except PostgresRejected as exc:
            raise CliError(f"cannot prepare the receipts table: {exc}") from exc
        return target if ready else None
    from connectors.smtp import SmtpTarget

    return SmtpTarget(name=name, host=args.smtp_host, port=args.smtp_port,
                      from_addr=args.from_addr)


def _run(args: argparse.Namespace) -> int:
    from ledger_stream.connector import collector
    from ledger_stream.connector.runtime import ConnectorOptions, ConnectorWorker
    from ledger_stream.kafka.bootstrap import resolve_bootstrap
    from ledger_stream.kafka.exceptions import KafkaSetupError
    from ledger_stream.processor.metrics import serve_metrics

    settings = settings_from(
        args, connector_name=args.name, connector_lease_ms=args.lease_ms,
        connector_call_timeout_s=args.call_timeout, connector_record_margin_s=args.record_margin,
        connector_lookup_delay_s=args.lookup_delay, connector_instance_id=args.instance_id,
        connector_metrics_port=args.metrics_port, connector_dsn=getattr(args, "dsn", None),
        connector_max_in_flight=args.max_in_flight, connector_fast_path=args.fast_path,
        connector_lookup_patience_s=args.lookup_patience, metrics_host=args.metrics_host)
    options = ConnectorOptions(
        instance_id=settings.connector.instance_id, lease_ms=settings.connector.lease_ms,
        call_timeout_s=settings.connector.call_timeout_s,
        record_margin_s=settings.connector.record_margin_s,
        clock_skew_ms=settings.processor.clock_skew_ms,
        lookup_delay_s=settings.connector.lookup_delay_s,
        lookup_patience_s=settings.connector.lookup_patience_s,
        max_in_flight=settings.connector.max_in_flight,
        fast_path=settings.connector.fast_path,
        fast_path_max_age_s=settings.connector.fast_path_max_age_s)
    stop = _stop_on_signals()
    try:
        target = build_target(args, settings, stop)
        if target is None:
            return 0  # stopped while waiting for the target
        options.check(target.deduplicates)
        worker = ConnectorWorker(settings, resolve_bootstrap(settings), target, options)
    except (ValueError, KafkaSetupError) as exc:
        raise CliError(str(exc)) from exc
    try:
        serve_metrics(settings.connector.metrics_port, f"connector {target.name}",
                      settings.process.metrics_host)
    except OSError as exc:
        raise CliError(f"cannot serve metrics on port {settings.connector.metrics_port}: "
                       f"{exc}") from exc
    # This process is the connector's own: what start-up built stays out of the cyclic
    # collector's reach (a library call leaves an embedding process's collector alone).
    collector.tune()
    try:
        return worker.run(stop)
    except KafkaSetupError as exc:  # e.g. topics at another partition count (LayoutRefused)
        raise CliError(str(exc)) from exc


def _stop_on_signals() -> threading.Event:
    import signal

    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    return stop

"""``ledger-stream api``: the HTTP gateway (agents in any language, operators' scripts)."""

from __future__ import annotations

import argparse
import logging
import os
import socket

from ledger_stream.cli.common import (
    CliError,
    add_common_flags,
    add_metrics_host_flag,
    settings_from,
)
from ledger_stream.gateway.groups import help_lines
from ledger_stream.logs import log_fields


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "api", help="the HTTP gateway: submit intents, read operations, alerts, timelines",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Serve the ledger over HTTP (OpenAPI at /openapi.json, docs at /docs,\n"
        "the operator console at /console). Its route groups (the OpenAPI tags):\n\n"
        f"{help_lines()}\n\n"
        "Every route but /healthz, /metrics and /console needs 'Authorization: Bearer\n"
        "<API key>'; each key acts for one tenant and never reads or writes another\n"
        "tenant's keys, and decisions, freezes and approvals need an operator's key.\n"
        "/metrics answers this host only unless --metrics-host opens it. There is no\n"
        "TLS: serve on loopback or behind a TLS-terminating proxy.")
    parser.add_argument("--host", help="listen address (env: LEDGER_API_HOST; default "
                        "127.0.0.1)")
    parser.add_argument("--port", type=int, help="port (env: LEDGER_API_PORT; default 8079)")
    parser.add_argument("--keys", metavar="TENANT:ROLE=KEY,...",
                        help="API keys (env: LEDGER_API_KEYS; prefer the file or env: flags "
                        "show in process lists)")
    parser.add_argument("--keys-file", metavar="FILE",
                        help="API keys, one per line: TENANT:operator:NAME=KEY for "
                        "operator NAME's key (decisions and freezes, audited as NAME), "
                        "TENANT:agent=KEY for an agent's; TENANT=KEY is an agent's too "
                        "(env: LEDGER_API_KEYS_FILE)")
    add_metrics_host_flag(parser)
    add_common_flags(parser)
    parser.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    from ledger_stream.domain.approval import InvalidApprovalKey
    from ledger_stream.gateway import ApiKeyError, ApiKeys, build_app
    from ledger_stream.gateway.serve import serve
    from ledger_stream.kafka.exceptions import KafkaSetupError
    from ledger_stream.sdk.client import AsyncLedgerClient

    settings = settings_from(args, api_host=args.host, api_port=args.port, api_keys=args.keys,
                             api_keys_file=args.keys_file,
                             metrics_host=args.metrics_host)
    try:
        gateway = settings.gateway
        keys = ApiKeys.parse(gateway.keys.get_secret_value() if gateway.keys else "",
                             settings.gateway.keys_file)
    except ApiKeyError as exc:
        raise CliError(str(exc)) from exc
    if keys.unnamed:
        logging.getLogger("ledger_stream.gateway").warning(
            "API keys given as TENANT=KEY name no holder: they are agents' keys, and the "
            "operator routes (decisions, freezes) refuse them; give an operator's key as "
            "TENANT:operator:NAME=KEY", extra=log_fields(where=list(keys.unnamed)))
    try:
        client = AsyncLedgerClient(settings)
    except KafkaSetupError as exc:
        raise CliError(str(exc)) from exc
    try:
        app = build_app(client, keys)
    except InvalidApprovalKey as exc:  # LEDGER_APPROVAL_SIGNING_KEY, for the approval route
        client.client.close()
        raise CliError(str(exc)) from exc
    logging.getLogger("ledger_stream.gateway").info("api serving", extra=log_fields(
        instance=f"{socket.gethostname()}-{os.getpid()}",
        url=f"http://{settings.gateway.host}:{settings.gateway.port}", openapi="/openapi.json"))
    try:
        serve(app, settings.gateway.host, settings.gateway.port)
    except OSError as exc:
        raise CliError(f"cannot serve on {settings.gateway.host}:{settings.gateway.port}: {exc}") \
            from exc
    finally:
        client.client.close()
    return 0


"""``ledger-stream mcp``: serve the ledger to MCP hosts over stdio or streamable HTTP."""

from __future__ import annotations

import argparse
import logging
import signal
import threading
import uuid
from typing import TYPE_CHECKING

from ledger_stream.cli.common import CliError, add_common_flags, add_key_flags, settings_from
from ledger_stream.kafka.exceptions import KafkaSetupError
from ledger_stream.logs import log_fields

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

    from ledger_stream.config import Settings
    from ledger_stream.gateway.auth import ApiKeys


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "mcp",
        help="serve the ledger as an MCP server (submit_effect, get_operation, "
        "list_unresolved)",
        description="An MCP server for hosts that cannot use the Python SDK: submit_effect "
        "applies a registered effect once per business id, the key derived from the argument "
        "fields its registration names, get_operation answers its state "
        "and receipt, list_unresolved lists what is not settled. The tenant and the effects "
        "come from this configuration, never from the model. Needs `pip install "
        "ledger-stream[mcp]`. stdio: the host starts this command (no key: only the host talks "
        "to it); http: streamable HTTP at http://HOST:PORT/mcp, every request with "
        "'Authorization: Bearer <API key>' of the tenant (the gateway's keys; it refuses to "
        "start without keys unless --no-auth). Runs until the host closes stdin, SIGTERM or "
        "Ctrl-C.",
    )
    parser.add_argument("--tenant", metavar="NAME",
                        help="tenant of every operation (env: LEDGER_MCP_TENANT; required)")
    parser.add_argument("--effects", metavar="NAME=ACTION@TARGET[FIELD,...],...",
                        help="effects offered and the argument fields naming each one's "
                        "business id, e.g. refund=refund@payments[invoice]; "
                        "[unsafe-model-id] keys an effect by the model's operation_id "
                        "instead (unsafe: a regenerated answer pays twice) (env: "
                        "LEDGER_MCP_EFFECTS; required)")
    parser.add_argument("--transport", choices=("stdio", "http"),
                        help="stdio or streamable HTTP (env: LEDGER_MCP_TRANSPORT; "
                        "default stdio)")
    parser.add_argument("--host", metavar="ADDR",
                        help="HTTP listen address (env: LEDGER_MCP_HOST; default 127.0.0.1)")
    parser.add_argument("--port", type=int, metavar="PORT",
                        help="HTTP port (env: LEDGER_MCP_PORT; default 8078)")
    add_key_flags(parser, "the MCP server over HTTP", metrics=False)
    add_common_flags(parser)
    parser.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    settings = settings_from(args, mcp_tenant=args.tenant, mcp_effects=args.effects,
                             mcp_transport=args.transport, mcp_host=args.host,
                             mcp_port=args.port, api_keys=args.keys,
                             api_keys_file=args.keys_file)
    try:
        from ledger_stream.mcp.server import LedgerTools, build_server
    except ImportError as exc:
        raise CliError(f"the MCP server needs the mcp package: pip install "
                       f"'ledger-stream[mcp]' ({exc})") from exc
    from ledger_stream.domain.keys import InvalidKeyError, operation_key, reserved_tenant
    from ledger_stream.mcp.effects import EffectSpecError, parse_effects
    from ledger_stream.sdk.client import LedgerClient

    if not settings.mcp.tenant:
        raise CliError("--tenant (LEDGER_MCP_TENANT) is required: the server's operations "
                       "belong to one tenant")
    try:
        operation_key(settings.mcp.tenant, "check", "check")
    except InvalidKeyError as exc:
        raise CliError(f"--tenant: {exc}") from exc
    reserved = reserved_tenant(settings.mcp.tenant)
    if reserved is not None:
        raise CliError(f"--tenant {settings.mcp.tenant!r}: {reserved}")
    try:
        effects = parse_effects(settings.mcp.effects or "")
    except EffectSpecError as exc:
        raise CliError(f"--effects (LEDGER_MCP_EFFECTS): {exc}") from exc
    keys = _http_keys(settings, args.no_auth)
    try:
        client = LedgerClient(settings)
    except KafkaSetupError as exc:
        raise CliError(str(exc)) from exc
    session = f"mcp-{uuid.uuid4().hex[:8]}"  # this run's instance id, in every intent
    logging.getLogger("ledger_stream.mcp").info("mcp server started", extra=log_fields(
        instance=session, tenant=settings.mcp.tenant, effects=sorted(effects),
        transport=settings.mcp.transport))
    for effect in effects.values():
        if effect.model_id:
            logging.getLogger("ledger_stream.mcp").warning(
                "effect keyed by the model's operation_id: a regenerated answer that writes "
                "another id is a second effect", extra=log_fields(effect=effect.name))
    with client:
        server = build_server(LedgerTools(client, settings.mcp.tenant, effects),
                              session=session)
        if settings.mcp.transport == "stdio":
            # SIGTERM and Ctrl-C end the process at once: the server's stdin reader is a
            # thread blocked in a read that no exception reaches, so an exit raised by a
            # handler (main's SystemExit, Python's KeyboardInterrupt) waited for the host
            # to close stdin (hostile reviews, 2026-12-05). This command starts no process,
            # and an intent not yet sent is one its caller never heard back about.
            if threading.current_thread() is threading.main_thread():
                for signum in (signal.SIGTERM, signal.SIGINT):
                    signal.signal(signum, signal.SIG_DFL)
            server.run("stdio")
        else:
            _serve_http(server, keys, settings)
    return 0


def _http_keys(settings: Settings, no_auth: bool) -> ApiKeys | None:
    """The keys the HTTP transport answers (None over stdio, or with --no-auth)."""
    from ledger_stream.access import ServingRefused, serving_keys

    if settings.mcp.transport != "http":
        return None
    try:
        return serving_keys(settings, no_auth=no_auth, host=settings.mcp.host,
                            surface="the MCP server over HTTP")
    except ServingRefused as exc:
        raise CliError(str(exc)) from exc


def _serve_http(server: MCPServer, keys: ApiKeys | None, settings: Settings) -> None:
    from ledger_stream.gateway.serve import serve
    from ledger_stream.mcp.http import TenantKeyGate

    assert settings.mcp.tenant
    app = TenantKeyGate(server.streamable_http_app(host=settings.mcp.host), keys,
                        settings.mcp.tenant)
    try:
        serve(app, settings.mcp.host, settings.mcp.port)
    except OSError as exc:
        raise CliError(f"cannot serve MCP on {settings.mcp.host}:{settings.mcp.port}: {exc}") \
            from exc

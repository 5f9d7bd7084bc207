"""``ledger-stream view``: serve each key's latest receipt and its timeline over HTTP, one
store lookup per request."""

from __future__ import annotations

import argparse

from ledger_stream.cli.common import (
    CliError,
    add_common_flags,
    add_key_flags,
    kafka_failure,
    settings_from,
)
from ledger_stream.kafka.exceptions import KafkaSetupError


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "view",
        help="serve the view: each key's latest receipt (status) and timeline (inspect)",
        description="Read every partition of <prefix>.receipts into a local RocksDB (each "
        "key's latest receipt and the position reached, written together) and, unless "
        "--no-timeline, every record of every ledger topic by key; answer "
        "GET /v1/operations/KEY[?after=OFFSET&wait_ms=MS], /v1/timeline/KEY, "
        "/v1/evidence/KEY, /v1/decisions/ID, /healthz and /metrics. Every route but /healthz and "
        "/metrics needs 'Authorization: Bearer <API key>' (the gateway's tenant keys; each "
        "reads only its tenant's keys); it refuses to start without keys unless --no-auth. "
        "Clients with LEDGER_VIEW_URL set ask it (with LEDGER_VIEW_KEY) instead of reading "
        "the key's partitions. A restart resumes from the stored "
        "positions. Runs until SIGTERM or Ctrl-C. See docs/view.md.",
    )
    parser.add_argument("--host", metavar="ADDR",
                        help="listen address (env: LEDGER_VIEW_HOST; default 127.0.0.1)")
    parser.add_argument("--port", type=int, metavar="PORT",
                        help="HTTP port, 0 for any free one (logged) (env: LEDGER_VIEW_PORT; "
                        "default 8077)")
    parser.add_argument("--state-dir", metavar="DIR",
                        help="view store folder (env: LEDGER_VIEW_STATE_DIR; default HOME/view)")
    parser.add_argument("--no-timeline", dest="timeline", action="store_false", default=None,
                        help="keep only the latest receipts, not the timelines "
                        "(env: LEDGER_VIEW_TIMELINE=false)")
    add_key_flags(parser, "the view")
    add_common_flags(parser)
    parser.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    from confluent_kafka import KafkaException

    from ledger_stream.access import ServingRefused
    from ledger_stream.state.exceptions import StoreError
    from ledger_stream.view.follower import ViewStartError
    from ledger_stream.view.service import run_view

    settings = settings_from(args, view_host=args.host, view_port=args.port,
                             view_state_dir=args.state_dir, view_timeline=args.timeline,
                             api_keys=args.keys, api_keys_file=args.keys_file,
                             metrics_host=args.metrics_host)
    try:
        run_view(settings, no_auth=args.no_auth)
    except OSError as exc:
        raise CliError(f"cannot serve the view on {settings.view.host}:{settings.view.port}: "
                       f"{exc}") from exc
    except (KafkaSetupError, StoreError, ViewStartError, ServingRefused) as exc:
        raise CliError(str(exc)) from exc
    except KafkaException as exc:
        raise kafka_failure(exc, "cannot read the ledger topics") from exc
    return 0

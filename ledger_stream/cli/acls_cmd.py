"""``ledger-stream acls apply``: the ledger's Kafka ACLs for the principals a deployment
names, created idempotently (``--dry-run`` prints them)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ledger_stream.cli.common import CliError, add_common_flags, seconds, settings_from
from ledger_stream.kafka.acls import (
    DEFAULT_FILE,
    AclSetError,
    acl_set,
    apply_acls,
    load_roles,
    parse_principals,
)
from ledger_stream.kafka.bootstrap import resolve_bootstrap
from ledger_stream.kafka.exceptions import KafkaSetupError


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "acls", help="apply the ledger's Kafka ACLs",
        description="Kafka ACLs per role (agent, connector, monitor, processor, operator, "
        "view, ...), as deploy/acls/acls.toml defines them.")
    actions = parser.add_subparsers(dest="acls_action", metavar="ACTION", required=True)
    apply = actions.add_parser(
        "apply", help="grant each named principal its role's ACLs",
        description="Create the ACLs that give each principal its role's grants, names "
        "filled in from the topic prefix and the processor's consumer group. Existing ACLs "
        "are kept; nothing is removed. Run it as a principal allowed to alter ACLs "
        "(a super user), with LEDGER_KAFKA_SECURITY_PROTOCOL, LEDGER_KAFKA_SASL_*.")
    apply.add_argument(
        "--principal", "--principals", dest="principals", action="append", default=[],
        metavar="ROLE=User:NAME[,...]", required=True,
        help="the principal holding a role, e.g. agent=User:agent (repeat, or separate "
        "with commas); roles not named get nothing")
    apply.add_argument("--file", type=Path, default=DEFAULT_FILE, metavar="FILE",
                       help=f"the ACL file (default {DEFAULT_FILE})")
    apply.add_argument("--consumer-group", metavar="NAME",
                       help="the processor's consumer group (env: LEDGER_CONSUMER_GROUP)")
    apply.add_argument("--dry-run", action="store_true",
                       help="print the ACLs and whether each exists; create nothing")
    apply.add_argument("--timeout", type=seconds(), default=30.0, metavar="SECONDS",
                       help="how long to wait for Kafka's answers (default 30)")
    add_common_flags(apply)
    apply.set_defaults(handler=_apply)


def _apply(args: argparse.Namespace) -> int:
    settings = settings_from(args, consumer_group=args.consumer_group)
    try:
        acls = acl_set(load_roles(args.file), parse_principals(args.principals), settings)
        reports = apply_acls(resolve_bootstrap(settings), acls, dry_run=args.dry_run,
                             timeout_s=args.timeout)
    except (AclSetError, KafkaSetupError) as exc:
        raise CliError(str(exc)) from exc
    for report in reports:
        print(report.line())
    return 0

"""The ledger's Kafka ACLs: each role's grants (``deploy/acls/acls.toml``) for the principals
a deployment names, and their idempotent creation.

A role is what a kind of client does (agent, connector, monitor, processor, ...); a principal
(``User:payments-connector``) is who holds it. Every grant is an ALLOW for any host; Kafka
denies what no ACL allows once an authorizer runs, so an agent that may write intents and
read receipts cannot forge an attempt outcome, and a connector cannot write an intent.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from ledger_stream.config import Settings
from ledger_stream.kafka.client_config import CLIENT_CONFIG
from ledger_stream.kafka.exceptions import KafkaSetupError

DEFAULT_FILE = Path("deploy/acls/acls.toml")
RESOURCES = {"topic": ResourceType.TOPIC, "group": ResourceType.GROUP,
             "transactional_id": ResourceType.TRANSACTIONAL_ID,
             "cluster": ResourceType.BROKER}  # librdkafka's name for the cluster resource
PATTERNS = {"literal": ResourcePatternType.LITERAL, "prefixed": ResourcePatternType.PREFIXED}
OPERATIONS = {"Read": AclOperation.READ, "Write": AclOperation.WRITE,
              "Describe": AclOperation.DESCRIBE, "DescribeConfigs": AclOperation.DESCRIBE_CONFIGS,
              "AlterConfigs": AclOperation.ALTER_CONFIGS,
              "IdempotentWrite": AclOperation.IDEMPOTENT_WRITE}
ANY_HOST = "*"


class AclSetError(ValueError):
    """The ACL file or the principals given for it are not usable; the message says why."""


@dataclass(frozen=True)
class Grant:
    """One role's permission on one resource, names still templates (``{prefix}``)."""

    resource: str
    name: str
    operations: tuple[str, ...]
    pattern: str = "literal"
    why: str = ""


@dataclass(frozen=True)
class Acl:
    """One ACL to hold on the cluster: ``principal`` may ``operation`` on the resource."""

    principal: str
    resource: str
    name: str
    pattern: str
    operation: str

    def binding(self) -> AclBinding:
        return AclBinding(RESOURCES[self.resource], self.name, PATTERNS[self.pattern],
                          self.principal, ANY_HOST, OPERATIONS[self.operation],
                          AclPermissionType.ALLOW)

    def line(self) -> str:
        return (f"ALLOW {self.principal} {self.operation} {self.resource}:{self.name}"
                f"{' (prefixed)' if self.pattern == 'prefixed' else ''}")


@dataclass(frozen=True)
class AclReport:
    """What :func:`apply_acls` found or did for one ACL."""

    acl: Acl
    status: Literal["created", "exists", "would create"]

    def line(self) -> str:
        return f"{self.acl.line()}: {self.status}"


def load_roles(path: Path) -> dict[str, tuple[Grant, ...]]:
    """Every role of the ACL file at ``path`` and its grants. AclSetError names the first
    problem (unknown resource, pattern or operation; a role without grants)."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:  # its message quotes the bytes
        raise AclSetError(f"cannot read the ACL file {path}: not UTF-8 text (byte "
                          f"{exc.start + 1})") from exc
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise AclSetError(f"cannot read the ACL file {path}: {exc}") from exc
    roles: dict[str, tuple[Grant, ...]] = {}
    for role, body in data.get("roles", {}).items():
        grants = tuple(_grant(role, entry) for entry in body.get("allow", []))
        if not grants:
            raise AclSetError(f"{path}: role {role} grants nothing")
        roles[role] = grants
    if not roles:
        raise AclSetError(f"{path} defines no roles")
    return roles


def _grant(role: str, entry: Mapping[str, Any]) -> Grant:
    grant = Grant(str(entry.get("resource")), str(entry.get("name", "")),
                  tuple(entry.get("operations", ())), str(entry.get("pattern", "literal")),
                  str(entry.get("why", "")))
    if grant.resource not in RESOURCES:
        raise AclSetError(f"role {role}: unknown resource {grant.resource!r} "
                          f"(one of {', '.join(RESOURCES)})")
    if grant.pattern not in PATTERNS:
        raise AclSetError(f"role {role}: unknown pattern {grant.pattern!r} (literal, prefixed)")
    unknown = [op for op in grant.operations if op not in OPERATIONS]
    if unknown or not grant.operations or not grant.name:
        raise AclSetError(f"role {role}, {grant.resource} {grant.name!r}: needs a name and "
                          f"operations among {', '.join(OPERATIONS)} (got {unknown or 'none'})")
    return grant


def parse_principals(values: Iterable[str]) -> dict[str, str]:
    """``ROLE=User:NAME`` items (each may hold several, comma-separated) as role -> principal."""
    principals: dict[str, str] = {}
    for item in (part.strip() for value in values for part in value.split(",")):
        if not item:
            continue
        role, sep, principal = item.partition("=")
        kind, colon, name = principal.partition(":")
        if not sep or not colon or not kind or not name or not role:
            raise AclSetError(f"{item!r}: expected ROLE=User:NAME")
        if role in principals and principals[role] != principal:
            raise AclSetError(f"role {role} given twice ({principals[role]}, {principal})")
        principals[role.strip()] = principal.strip()
    return principals


def acl_set(roles: Mapping[str, tuple[Grant, ...]], principals: Mapping[str, str],
            settings: Settings) -> list[Acl]:
    """The ACLs that give each principal its role's grants, names filled in from
    ``settings`` (topic prefix, processor group). AclSetError for a role the file lacks."""
    unknown = sorted(set(principals) - set(roles))
    if unknown:
        raise AclSetError(f"unknown role(s) {', '.join(unknown)}: the file defines "
                          f"{', '.join(sorted(roles))}")
    names = {"prefix": settings.topics.prefix, "group": settings.processor.consumer_group}
    acls: dict[Acl, None] = {}  # ordered, without repeats
    for role, principal in principals.items():
        for grant in roles[role]:
            name = grant.name.format(**names)
            for operation in grant.operations:
                acls[Acl(principal, grant.resource, name, grant.pattern, operation)] = None
    return list(acls)


def apply_acls(bootstrap: str, acls: list[Acl], *, dry_run: bool = False,
               timeout_s: float = 30.0) -> list[AclReport]:
    """Create the ACLs the cluster does not hold yet; remove and alter nothing.

    Idempotent: a second call reports every ACL as ``exists``. With ``dry_run`` nothing is
    created (the missing ones are reported ``would create``). KafkaSetupError when the
    cluster does not answer, has no authorizer, or refuses (the caller is not allowed to
    alter ACLs)."""
    admin = AdminClient({"bootstrap.servers": bootstrap, **CLIENT_CONFIG})
    held = _held(admin, timeout_s)
    missing = [acl for acl in acls if _key(acl.binding()) not in held]
    if missing and not dry_run:
        futures = admin.create_acls([acl.binding() for acl in missing],
                                    request_timeout=timeout_s)
        named = {_key(acl.binding()): acl for acl in missing}
        for binding, future in futures.items():
            try:
                future.result()
            except KafkaException as exc:  # e.g. "No Authorizer is configured."
                raise KafkaSetupError(f"creating {named[_key(binding)].line()} failed: "
                                      f"{exc.args[0].str()}") from exc
    fresh = {id(acl) for acl in missing}
    status: Literal["created", "would create"] = "would create" if dry_run else "created"
    return [AclReport(acl, status if id(acl) in fresh else "exists") for acl in acls]


def _held(admin: AdminClient, timeout_s: float) -> set[tuple[Any, ...]]:
    # None matches any name, principal and host (the stubs say str; librdkafka takes NULL).
    anything: Any = None
    everything = AclBindingFilter(ResourceType.ANY, anything, ResourcePatternType.ANY,
                                  anything, anything, AclOperation.ANY, AclPermissionType.ANY)
    try:
        found = admin.describe_acls(everything, request_timeout=timeout_s).result()
    except KafkaException as exc:
        raise KafkaSetupError(f"cannot read the cluster's ACLs (is an authorizer configured, "
                              f"and may this principal describe ACLs?): "
                              f"{exc.args[0].str()}") from exc
    return {_key(binding) for binding in found}


def _key(binding: AclBinding) -> tuple[Any, ...]:
    return (binding.restype, binding.name, binding.resource_pattern_type, binding.principal,
            binding.host, binding.operation, binding.permission_type)

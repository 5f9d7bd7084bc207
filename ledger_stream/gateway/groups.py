"""The gateway's route groups: one OpenAPI tag each, named in ``ledger-stream api --help``.

Kept free of the web framework so that the CLI's help names them without importing it.
Every route of the app carries one of these tags (``build_app`` refuses a route that
carries another, and tests/gateway/test_openapi_answers.py compares this table with the
app's route table), so a new group cannot be left out of the help or the docs.
"""

from __future__ import annotations

from typing import NamedTuple


class RouteGroup(NamedTuple):
    name: str
    summary: str  # one short line: what the group's routes do, and whose key they take


GROUPS = (
    RouteGroup("intents", "submit an intent, wait for its answer (any key)"),
    RouteGroup("operations", "a key's receipt, timeline and evidence (any key)"),
    RouteGroup("alerts", "the tenant's alerts in time order, by kind (any key)"),
    RouteGroup("reconciliation", "keys waiting for an operator; decide one (operator)"),
    RouteGroup("freezes", "freezes in force; freeze, unfreeze an action (operator)"),
    RouteGroup("approvals", "intents waiting for approval; sign one (operator)"),
    RouteGroup("keys", "who the API key acts for: tenant, operator (any key)"),
    RouteGroup("service", "liveness and Prometheus metrics (no API key)"),
)
NAMES = frozenset(group.name for group in GROUPS)


def openapi_tags() -> list[dict[str, str]]:
    """The groups as the OpenAPI document's ``tags``."""
    return [{"name": group.name, "description": group.summary} for group in GROUPS]


def help_lines() -> str:
    """One line a group, for ``ledger-stream api --help``."""
    width = max(len(group.name) for group in GROUPS)
    return "\n".join(f"  {group.name:<{width}}  {group.summary}" for group in GROUPS)

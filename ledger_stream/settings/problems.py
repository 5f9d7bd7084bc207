"""An invalid setting said in one line a person can act on: which setting (its flat name, the
one the environment, the settings file and the flags all use), where the refused value came
from (the command line, the ``LEDGER_*`` variable, or the settings file) and what is wrong
with it. Never the value itself: it may be a password.

A table setting (``actions``, ``kafka_client``) can be given by several sources at once,
merged key by key. The source named is then the one that gave the refused key (the highest
of those that did); when the sources cannot be told apart (a rule about a whole table or
entry several of them gave parts of), every source that gave it is named, ``from
LEDGER_ACTIONS or the command line``, never a guess.
"""

from __future__ import annotations

import json
import os
import re
import tomllib
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ValidationError
from pydantic_settings import SettingsError

from ledger_stream.settings.env_names import NESTED
from ledger_stream.settings.loading import ENV_PREFIX, FLAT_ROUTES, GROUPS

# (group, field) -> the setting's flat name.
_FLAT_OF: dict[tuple[str, str], str] = {route: flat for flat, route in FLAT_ROUTES.items()}

_UNKNOWN = object()  # a source's value that could not be read back: it may hold anything


def refused(exc: ValidationError, flags: Mapping[str, Any], config_file: str | None,
            environ: Mapping[str, str] | None = None) -> str:
    """``exc`` (from loading the settings) as ``invalid setting NAME (from SOURCE): what``,
    one part per refused setting. ``flags``: the values given on the command line, by flat
    name (None: not given); ``config_file``: the settings file read, if any."""
    env = os.environ if environ is None else environ
    parts = []
    for error in exc.errors(include_url=False, include_input=False, include_context=False):
        what = error["msg"].removeprefix("Value error, ")  # a validator's own sentence
        loc = error["loc"]
        if len(loc) == 1 and loc[0] in GROUPS:  # a rule of a group's settings together
            parts.append(f"{_group_settings(str(loc[0]), what, flags, config_file, env)}: "
                         f"{what}")
            continue
        name, *path = _setting(loc)
        where = _source(name, path, flags, config_file, env)
        parts.append(f"{'.'.join([name, *path])}{_from(where)}: {what}")
    return "invalid setting " + "; ".join(parts)


def unparsed(exc: SettingsError, flags: Mapping[str, Any], config_file: str | None,
             environ: Mapping[str, str] | None = None) -> str:
    """A value the environment gave that could not even be read (a table or a list there is
    JSON, and this was not), said as :func:`refused` says the others."""
    env = os.environ if environ is None else environ
    found = re.search(r'field "([^"]+)"', str(exc))
    name = found.group(1) if found else "(unknown)"
    variable = f"{ENV_PREFIX}{name}".upper()
    unread = sorted(key for key, text in env.items()
                    if key.upper() == variable and _json(text) is _UNKNOWN)
    where = " or ".join(unread) or _source(name, [], flags, config_file, env)
    return (f"invalid setting {name}{_from(where)}: not JSON (in the environment a table is "
            "written as a JSON object, a list as a JSON array)")


def _from(where: str) -> str:
    return f" (from {where})" if where else ""


def _setting(loc: tuple[int | str, ...]) -> list[str]:
    """The setting a pydantic location names: ``('processor', 'max_batch')`` is
    ``max_batch``; the parts below a setting (the keys of a table) follow it."""
    if not loc:
        return ["(the settings as a whole)"]
    group, rest = str(loc[0]), [str(part) for part in loc[1:]]
    if not rest:
        return [group]
    field = rest[0]
    flat = field if field in FLAT_ROUTES else _FLAT_OF.get((group, field), f"{group}.{field}")
    return [flat, *rest[1:]]


def _group_settings(group: str, what: str, flags: Mapping[str, Any],
                    config_file: str | None, env: Mapping[str, str]) -> str:
    """The settings a rule of ``group`` as a whole is about: those its message names, each
    with its source; else the group's settings together."""
    named = [flat for flat, (owner, _) in FLAT_ROUTES.items()
             if owner == group and re.search(rf"\b{re.escape(flat)}\b", what)]
    if not named:
        return f"among the {group} settings"
    return " and ".join(f"{flat}{_from(_source(flat, [], flags, config_file, env))}"
                        for flat in named)


def _source(name: str, path: Sequence[str], flags: Mapping[str, Any],
            config_file: str | None, env: Mapping[str, str]) -> str:
    """Where the refused value of the flat setting ``name`` came from, at ``path`` below it
    (a table's keys: ``["refund"]``); '' when no source gave it (a default). The highest
    source (flag, environment, file) holding that key gave the value when the key holds
    one value; otherwise every source that gave any of it is named."""
    if name not in FLAT_ROUTES:
        return config_file or ""
    given = _given(name, flags, config_file, env)
    holding = [(source, _at(value, path)) for source, value in given]
    holding = [(source, value) for source, value in holding if value is not None]
    if holding and holding[0][1] is not _UNKNOWN and not isinstance(holding[0][1], Mapping):
        return holding[0][0]
    return " or ".join(source for source, _ in holding or given)


def _given(name: str, flags: Mapping[str, Any], config_file: str | None,
           env: Mapping[str, str]) -> list[tuple[str, Any]]:
    """Each source that gives the flat setting ``name``, highest precedence first, with
    what it gives (``_UNKNOWN`` when that cannot be read back)."""
    given: list[tuple[str, Any]] = []
    if flags.get(name) is not None:
        given.append(("the command line", flags[name]))
    variable = f"{ENV_PREFIX}{name}".upper()
    for key in sorted(env):
        upper = key.upper()
        if upper == variable:
            given.append((key, _json(env[key])))
        elif upper.startswith(variable + NESTED):
            value: Any = env[key]
            for part in reversed(key[len(variable) + len(NESTED):].split(NESTED)):
                value = {part: value}
            given.append((key, value))
    if config_file:
        value = _in_file(config_file, name)
        if value is not None:
            given.append((config_file, value))
    return given


def _json(text: str) -> Any:
    """An environment value as the settings read a table's or a list's (JSON); a scalar
    setting's value is not JSON and stands for itself."""
    try:
        return json.loads(text)
    except ValueError:
        return _UNKNOWN if text.lstrip()[:1] in ("[", "{", "") else text


def _in_file(config_file: str, name: str) -> Any:
    """What the settings file gives ``name`` (a top-level key in any case, or its group's
    table by field or flat name), None when nothing; ``_UNKNOWN`` if it cannot be read."""
    try:
        with open(os.path.expanduser(config_file), "rb") as stream:
            data = tomllib.load(stream)
    except (OSError, ValueError):
        return _UNKNOWN
    group, field = FLAT_ROUTES[name]
    for key, value in data.items():
        if key.lower() == name:
            return value
    table = data.get(group)
    if isinstance(table, Mapping):
        return table.get(field, table.get(name))
    return None


def _at(value: Any, path: Sequence[str]) -> Any:
    """The part of ``value`` at ``path`` (keys matched in any case: the environment's
    nested keys arrive in lower case), None when ``value`` has none there."""
    for part in path:
        if value is _UNKNOWN:
            return value
        if isinstance(value, Mapping):
            value = next((v for k, v in value.items() if str(k).lower() == part.lower()),
                         None)
        elif isinstance(value, Sequence) and not isinstance(value, str) and part.isdigit():
            value = value[int(part)] if int(part) < len(value) else None
        else:
            return None
        if value is None:
            return None
    return value

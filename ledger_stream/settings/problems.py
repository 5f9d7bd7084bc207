"""An invalid setting said in one line a person can act on: which setting (its flat name, the
one the environment, the settings file and the flags all use), where the refused value came
from (the command line, the ``LEDGER_*`` variable, or the settings file) and what is wrong
with it. Never the value itself: it may be a password."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError
from pydantic_settings import SettingsError

from ledger_stream.settings.loading import ENV_PREFIX, FLAT_ROUTES

# (group, field) -> the setting's flat name.
_FLAT_OF: dict[tuple[str, str], str] = {route: flat for flat, route in FLAT_ROUTES.items()}


def refused(exc: ValidationError, flags: Mapping[str, Any], config_file: str | None,
            environ: Mapping[str, str] | None = None) -> str:
    """``exc`` (from loading the settings) as ``invalid setting NAME (from SOURCE): what``,
    one part per refused setting. ``flags``: the values given on the command line, by flat
    name (None: not given); ``config_file``: the settings file read, if any."""
    env = {name.upper(): name for name in (os.environ if environ is None else environ)}
    parts = []
    for error in exc.errors(include_url=False, include_input=False, include_context=False):
        name = _setting(error["loc"])
        where = _source(name, flags, config_file, env)
        what = error["msg"].removeprefix("Value error, ")  # a validator's own sentence
        parts.append(f"{name}{f' (from {where})' if where else ''}: {what}")
    return "invalid setting " + "; ".join(parts)


def unparsed(exc: SettingsError, flags: Mapping[str, Any], config_file: str | None,
             environ: Mapping[str, str] | None = None) -> str:
    """A value the environment gave that could not even be read (a table or a list there is
    JSON, and this was not), said as :func:`refused` says the others."""
    env = {name.upper(): name for name in (os.environ if environ is None else environ)}
    found = re.search(r'field "([^"]+)"', str(exc))
    name = found.group(1) if found else "(unknown)"
    where = _source(name, flags, config_file, env)
    return (f"invalid setting {name}{f' (from {where})' if where else ''}: not JSON (in the "
            "environment a table is written as a JSON object, a list as a JSON array)")


def _setting(loc: tuple[int | str, ...]) -> str:
    """The setting a pydantic location names: ``('processor', 'max_batch')`` is
    ``max_batch``; a part below a setting (a key of a table) follows it after a dot."""
    if not loc:
        return "(the settings as a whole)"
    group, rest = str(loc[0]), [str(part) for part in loc[1:]]
    if not rest:
        return group
    field = rest[0]
    flat = field if field in FLAT_ROUTES else _FLAT_OF.get((group, field), f"{group}.{field}")
    return ".".join([flat, *rest[1:]])


def _source(setting: str, flags: Mapping[str, Any], config_file: str | None,
            env: Mapping[str, str]) -> str:
    """Where ``setting``'s value came from, by the loader's precedence: a flag over the
    environment over the file ('' when none of them gave it: a default)."""
    name = setting.split(".", 1)[0]
    if name not in FLAT_ROUTES:
        return config_file or ""
    if flags.get(name) is not None:
        return "the command line"
    variable = f"{ENV_PREFIX}{name}".upper()
    if variable in env:
        return env[variable]
    nested = sorted(key for key in env if key.startswith(f"{variable}__"))
    if nested:
        return env[nested[0]]
    return config_file or ""

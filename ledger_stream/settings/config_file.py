"""The TOML settings file (``--config`` / ``LEDGER_CONFIG``), read so that nothing in it is
lost without a word: a file that is named must exist and be a regular file, must be UTF-8
TOML, and every top-level name in it must be one the settings read (a flat name, or a
group's table such as ``[processor]``). Below the top level the groups and the
``[actions.ACTION]`` tables refuse an unknown name themselves.

Without this, a typo in the file's path or in a top-level name left the defaults in force,
e.g. no approval for an action the operator meant to need one.
"""

from __future__ import annotations

import difflib
import tomllib
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any


class ConfigFileError(ValueError):
    """The settings file cannot be used as it is; the message is one line naming the file."""


def read_config_file(path: str, flat_names: Collection[str] | Mapping[str, tuple[str, str]],
                     tables: Collection[str]) -> dict[str, Any]:
    """The top-level names and values of the TOML file ``path``. A flat name matches in any
    case (as the settings read it); a group's table (``tables``) only as written. One
    setting given twice (two cases of a flat name, or a flat name and its group's table:
    one would be dropped without a word) is refused; ``flat_names`` mapping each flat name
    to its (group, field) tells which table field a flat name is."""
    file = Path(path).expanduser()
    try:  # a path the system cannot even look up (too long, a loop) is refused as one
        exists, regular = file.exists(), file.is_file()
    except OSError as exc:
        raise ConfigFileError(f"config file {_shown(path)}: {exc.strerror or exc}") from None
    if not exists:
        raise ConfigFileError(f"config file {path}: no such file")
    if not regular:
        raise ConfigFileError(f"config file {path}: not a regular file")
    try:
        with file.open("rb") as stream:
            data = tomllib.load(stream)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigFileError(f"config file {path} is not valid TOML: {exc}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigFileError(f"config file {path} is not UTF-8 text: {exc}") from exc
    except OSError as exc:
        raise ConfigFileError(f"cannot read config file {path}: {exc.strerror or exc}") from exc
    flat = {name.lower() for name in flat_names}
    unknown = [name for name in data if name.lower() not in flat and name not in tables]
    if unknown:
        known = sorted({*flat_names, *tables})
        raise ConfigFileError(
            f"config file {path}: unknown setting{'s' if len(unknown) > 1 else ''} "
            + ", ".join(_unknown(name, known) for name in unknown))
    twice = _twice(data, flat_names if isinstance(flat_names, Mapping) else {})
    if twice:
        raise ConfigFileError(f"config file {path}: set twice (one would be dropped): "
                              + ", ".join(twice))
    return data


def _twice(data: Mapping[str, Any], routes: Mapping[str, tuple[str, str]]) -> list[str]:
    """The settings ``data`` gives twice: a flat name in two cases, or a flat name and the
    same field in its group's table (by the field's own name or its flat name)."""
    found: list[str] = []
    seen: dict[str, str] = {}
    for name in data:
        if name.lower() in seen:
            found.append(f"{seen[name.lower()]!r} and {name!r}")
        seen.setdefault(name.lower(), name)
    for name, (group, field) in routes.items():
        table = data.get(group)
        if name in seen and isinstance(table, Mapping):
            inside = [k for k in table if k.lower() in (field.lower(), name)]
            found += [f"{seen[name]!r} and [{group}] {k!r}" for k in inside]
    return found


def _shown(path: str, most: int = 200) -> str:
    """``path`` as a message shows it: at most ``most`` characters (the rest elided)."""
    return path if len(path) <= most else f"{path[:most]}... ({len(path)} characters)"


def _unknown(name: str, known: list[str]) -> str:
    close = difflib.get_close_matches(name.lower(), known, n=1)
    return f"{name!r}" + (f" (did you mean {close[0]!r}?)" if close else "")

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
from collections.abc import Collection
from pathlib import Path
from typing import Any


class ConfigFileError(ValueError):
    """The settings file cannot be used as it is; the message is one line naming the file."""


def read_config_file(path: str, flat_names: Collection[str],
                     tables: Collection[str]) -> dict[str, Any]:
    """The top-level names and values of the TOML file ``path``. A flat name matches in any
    case (as the settings read it); a group's table (``tables``) only as written."""
    file = Path(path).expanduser()
    if not file.exists():
        raise ConfigFileError(f"config file {path}: no such file")
    if not file.is_file():
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
    return data


def _unknown(name: str, known: list[str]) -> str:
    close = difflib.get_close_matches(name.lower(), known, n=1)
    return f"{name!r}" + (f" (did you mean {close[0]!r}?)" if close else "")

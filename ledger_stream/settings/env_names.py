"""Environment variables that look like a setting's but are not: a typo there would leave a
default in force without a word (``LEDGER_APPROVAL_REQUIRED_ACTION=refund`` for
``LEDGER_APPROVAL_REQUIRED_ACTIONS``: a refund dispatched without the approval asked for).

Unknown ``LEDGER_*`` names are otherwise allowed: the lab's (``LEDGER_BENCH_*``,
``LEDGER_SIM_*``), the build's (``LEDGER_BUILD_CORE``), ``LEDGER_CONFIG`` and a dict
setting's nested keys (``LEDGER_KAFKA_CLIENT__...``) share the prefix. So only a name within
a letter or two of a setting's (difflib ratio 0.9 or more) is refused, naming the one
meant; the closest of those others, ``LEDGER_BENCH_PARTITIONS``, is 0.85 from
``LEDGER_PARTITIONS``.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Mapping

from ledger_stream.settings.config_file import ConfigFileError

CLOSE = 0.9


class EnvNameError(ConfigFileError):
    """An environment variable names no setting but nearly one; the message says which."""


def misspelled(environ: Mapping[str, str], flat_names: Collection[str],
               prefix: str) -> list[str]:
    """``NAME (did you mean SETTING?)`` for each variable of ``environ`` with ``prefix``
    that is no setting (``flat_names``) but within ``CLOSE`` of one, in name order."""
    known = {prefix + name.upper() for name in flat_names}
    found = []
    for name in sorted(environ):
        upper = name.upper()
        if not upper.startswith(prefix) or upper in known:
            continue
        close = difflib.get_close_matches(upper, known, n=1, cutoff=CLOSE)
        if close:
            found.append(f"{name} (did you mean {close[0]}?)")
    return found


def check_environment(environ: Mapping[str, str], flat_names: Collection[str],
                      prefix: str) -> None:
    """EnvNameError naming every variable ``misspelled`` finds."""
    wrong = misspelled(environ, flat_names, prefix)
    if wrong:
        raise EnvNameError(f"environment variable{'s' if len(wrong) > 1 else ''} naming no "
                           f"setting: {', '.join(wrong)}")

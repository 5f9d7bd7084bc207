"""Environment variables that look like a setting's but are not: a typo there would leave a
default in force without a word (``LEDGER_APPROVAL_REQUIRED_ACTION=refund`` for
``LEDGER_APPROVAL_REQUIRED_ACTIONS``: a refund dispatched without the approval asked for).

Unknown ``LEDGER_*`` names are otherwise allowed: the lab's (``LEDGER_BENCH_*``,
``LEDGER_SIM_*``), the build's (``LEDGER_BUILD_CORE``), ``LEDGER_CONFIG`` and a setting's
nested keys (``LEDGER_KAFKA_CLIENT__...``, ``LEDGER_ACTIONS__refund__approval``) share the
prefix. So only a name within a letter or two of a setting's (difflib ratio 0.9 or more) is
refused, naming the one meant; the closest of those others, ``LEDGER_BENCH_PARTITIONS``, is
0.85 from ``LEDGER_PARTITIONS``. A nested name is a setting's, never a misspelling, when
the part before its first ``__`` is a setting; that part is what is compared otherwise
(``LEDGER_ACTION__refund__approval`` is refused as ``LEDGER_ACTION``).

A setting given both whole (``LEDGER_ACTIONS``) and by nested keys
(``LEDGER_ACTIONS__refund__approval``) is refused too: the nested value would override the
whole one's without a word (an approval the whole table asks for, dropped).
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Collection, Mapping

from ledger_stream.settings.config_file import ConfigFileError

CLOSE = 0.9
NESTED = "__"  # the environment's nested delimiter (loading.py)


class EnvNameError(ConfigFileError):
    """An environment variable names no setting but nearly one; the message says which."""


def misspelled(environ: Mapping[str, str], flat_names: Collection[str],
               prefix: str) -> list[str]:
    """``NAME (did you mean SETTING?)`` for each variable of ``environ`` with ``prefix``
    that is no setting (``flat_names``) but within ``CLOSE`` of one, in name order."""
    known = {prefix + name.upper() for name in flat_names}
    found = []
    for name in sorted(environ):
        head = name.upper().split(NESTED, 1)[0]  # a nested key's setting
        if not head.startswith(prefix) or head in known:
            continue
        close = difflib.get_close_matches(head, known, n=1, cutoff=CLOSE)
        if close:
            found.append(f"{name} (did you mean {close[0]}"
                         f"{NESTED + '...' if NESTED in name else ''}?)")
    return found


def given_twice(environ: Mapping[str, str], flat_names: Collection[str],
                prefix: str) -> list[str]:
    """``WHOLE and NESTED[, NESTED...]`` for each setting ``environ`` gives both whole and
    by nested keys that name an entry the whole one has too (the nested value would win
    without a word), in name order. Nested keys beside the whole table's other entries
    are merged into it, a table's secrets apart from the rest (a Secret beside a
    ConfigMap): not refused."""
    whole = {name.upper(): name for name in environ}
    found = []
    for flat in sorted(prefix + name.upper() for name in flat_names):
        if flat not in whole:
            continue
        held = _entries(environ[whole[flat]])
        nested = sorted(name for name in environ if name.upper().startswith(flat + NESTED)
                        and name[len(flat) + len(NESTED):].split(NESTED, 1)[0].lower()
                        in held)
        if nested:
            found.append(f"{whole[flat]} and {', '.join(nested)}")
    return found


def _entries(value: str) -> set[str]:
    """The entries (lower case, as nested keys are read) of a table given as JSON; none
    when it is not a JSON object (its own refusal says so)."""
    try:
        table = json.loads(value)
    except ValueError:
        return set()
    return {str(key).lower() for key in table} if isinstance(table, dict) else set()


def check_environment(environ: Mapping[str, str], flat_names: Collection[str],
                      prefix: str) -> None:
    """EnvNameError naming every variable ``misspelled`` finds, or else every setting
    ``given_twice``."""
    wrong = misspelled(environ, flat_names, prefix)
    if wrong:
        raise EnvNameError(f"environment variable{'s' if len(wrong) > 1 else ''} naming no "
                           f"setting: {', '.join(wrong)}")
    twice = given_twice(environ, flat_names, prefix)
    if twice:
        raise EnvNameError("a setting given whole and by nested keys in the environment (the "
                           f"nested would override the whole without a word): "
                           f"{'; '.join(twice)}: keep one")

"""How readers show a receipt's or an alert's detail: a target's text never verbatim.

Connectors now report a failure as a target error summary (``connector/redaction.py``):
``<ErrorClass> [<the Target's own words>]``, never the target's text. Records written
before that rule carry ``<ErrorClass>: <message>``, the message often the target's answer
(an HTTP body, a PostgreSQL error), and the processor copied it into receipt and alert
details. Those records stay on the topics until retention removes them, so every reader
(``inspect``, ``evidence``, the view, the gateway and its console) shows a detail through
``shown_detail``:

- the processor puts a connector's text in a detail in a few places only (``TARGET_TEXT``:
  after "outcome unknown: ", "attempt N not applied: ", "attempt N not called: ",
  "target cannot be queried: ", "outcome unknown from a claim without a grant: "; or as the
  whole detail of a key the target refused), up to the end or a trailing "; N attempts
  used" clause (and the policy it names);
- such a part is shown as it is when it is a summary (``SUMMARY``) or one of the connector
  core's own reasons (``CORE_REASONS``); anything else there becomes
  ``[target text withheld: N characters]``.

The rest of a detail is the ledger's own text (states, attempts, operators' names and
notes, decision marks) and is shown unchanged.
"""

from __future__ import annotations

import re

from ledger_stream.connector.redaction import SUMMARY

# Where the processor's details (domain/decide.py, domain/transitions.py) quote a connector.
TARGET_TEXT = re.compile(
    r"outcome unknown from a claim without a grant: |outcome unknown: "
    r"|attempt \d+ not (?:applied|called): |target cannot be queried: ")
# The detail of a key the target refused is the connector's text alone; before summaries
# it began with the error's class and a colon.
WHOLE = re.compile(r"[A-Z][A-Za-z0-9_]*: ")
# The decision policy that stopped the attempts may follow (domain/policy.py, ``cited``).
ATTEMPTS_USED = re.compile(r"; \d+ attempts used(?:, \d+ of them with an unknown outcome)?"
                           r"(?:; policy p-[0-9a-f]+ for [^\s;]+)?$")
# The connector core's own reasons for a claim it did not call (connector/core.py, runtime.py).
CORE_REASONS = re.compile(
    r"claim withdrawn: partition revoked or stopping|lease ran out before the call"
    r"|grant came with -?\d+ ms of lease left, \d+ ms needed")


# A conflict's receipt named the hash of the arguments the key holds before the decision
# core stopped doing so (domain/decide.py, CONFLICT_DETAIL): never shown to a caller.
HELD_ARGS = re.compile(r"key holds args \S*")
CONFLICT_SHOWN = "the key holds other arguments"


def shown_detail(detail: str) -> str:
    """``detail`` with any target text in it replaced by its length (module docstring), and
    no held arguments' hash."""
    if not detail:
        return detail
    if HELD_ARGS.fullmatch(detail):
        return CONFLICT_SHOWN
    found = TARGET_TEXT.search(detail)
    if found is not None:
        start = found.end()
    elif WHOLE.match(detail):
        start = 0
    else:
        return detail
    used = ATTEMPTS_USED.search(detail, start)
    end = used.start() if used is not None else len(detail)
    quoted = detail[start:end]
    if SUMMARY.fullmatch(quoted) or CORE_REASONS.fullmatch(quoted):
        return detail
    return f"{detail[:start]}[target text withheld: {len(quoted)} characters]{detail[end:]}"

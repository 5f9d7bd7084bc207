"""What a connector repeats of a failure: a target error summary, never the target's text.

A target's answer can echo what it was sent or holds (a card number in a decline message,
a row in a constraint error, a recipient in an SMTP reply), and a client library's
exception message often embeds that answer (``psycopg`` quotes the server's message,
``http.client`` the status line it could not parse). So the connector runtime never puts
an exception's message into an event, a log line, a span or a metric label. Every failure
it reports (an attempt's outcome error, a lookup's ``unavailable``) is a *summary*::

    <ErrorClass> [<what the Target said, in its own words>]

- For a ``TargetError`` the bracket holds its message. The Target writes that message from
  what it controls and must not quote the target (``connectors/`` keep: the HTTP status
  and its meaning, the SQLSTATE, phase and constraint name, the SMTP reply code, step and
  enhanced status code, the request line, the class of a local socket or TLS failure; and
  the length of the target's text, as ``withheld``). The runtime turns brackets in it into
  parentheses and cuts it to fit ``MAX_SUMMARY``.
- For any other exception (a library error a Target let through, a bug) only its class
  and its message's length: ``KeyError [message not shown: 42 characters]``.

No digest of the withheld text is kept: an unsalted hash of a short text whose only
unknown is a card number is reversed by trying the card numbers (PCI DSS asks for keyed
hashes of card numbers). An operator matches a failure against the target's own logs by
the attempt id, which every call carries to the target (``X-Attempt-Id``, the receipts
row's ``attempt_id``, the mail's ``X-Attempt-Id``) and every outcome records.

Readers recognise a summary by its shape (``SUMMARY``): connectors before this rule wrote
``<ErrorClass>: <message>``, which never has it (``history.detail``).
"""

from __future__ import annotations

import base64
import re
import traceback
from urllib.parse import SplitResult, unquote, urlsplit, urlunsplit

from ledger_stream.connector.target import TargetError

MAX_SUMMARY = 200  # what the core keeps of an outcome's error (``core.py``)
# A whole summary: a class name, one space, one bracket holding no brackets.
SUMMARY = re.compile(r"[A-Za-z_][A-Za-z0-9_]* \[[^\[\]\n]*\]")


def withheld(what: str, text: str | bytes) -> str:
    """How a Target names text it received and must not repeat: ``body: 57 characters
    withheld`` (bytes are counted as bytes)."""
    unit = "bytes" if isinstance(text, bytes) else "characters"
    return f"{what}: {len(text)} {unit} withheld"


def summary(error: BaseException) -> str:
    """The failure as the ledger records and logs it (see the module docstring)."""
    kind = type(error).__name__
    if isinstance(error, TargetError):
        said = " ".join(str(error).translate(_PARENS).split())  # one line
    else:
        said = _not_shown(error)
    room = MAX_SUMMARY - len(kind) - 3
    if len(said) > room:
        said = said[:room - 3] + "..."
    return f"{kind} [{said}]"


def unshown(error: BaseException) -> str:
    """Any exception by its class and its message's length only, for a tool that reports a
    failure it did not expect (a graph's exception in replay-plan or upgrade-check quotes
    the value it choked on: pydantic's ``input_value``): ``ValidationError [message not
    shown: 312 characters]``."""
    return f"{type(error).__name__} [{_not_shown(error)}]"


def _not_shown(error: BaseException) -> str:
    return f"message not shown: {len(str(error))} characters"


def bug_report(error: BaseException) -> str:
    """An unexpected exception for a log line: the frames of its traceback and the classes
    of its chain, without any exception's message (a cause's message can be the target's
    answer)."""
    lines: list[str] = []
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        frames = traceback.format_list(traceback.extract_tb(current.__traceback__))
        lines.append(f"{type(current).__name__} (message not shown)\n" + "".join(frames))
        current = current.__cause__ or current.__context__
    return "caused by: ".join(lines)


_PARENS = str.maketrans("[]", "()")
_PASSWORD_KEYS = r"(?i)\b(password|passwd|pwd|sslpassword)(\s*=\s*)"
# In a URL's query a value ends at '&' or ';'.
_URL_PASSWORD = re.compile(_PASSWORD_KEYS + r"('(?:[^'\\]|\\.)*'|[^\s&;]*)")
# In a key=value connection string (libpq's) a value ends only at unescaped white space;
# a quoted one at its closing quote, or at the end when the quote is never closed.
_DSN_PASSWORD = re.compile(_PASSWORD_KEYS + r"('(?:[^'\\]|\\.)*(?:'|$)|(?:[^\s\\]|\\.)*)")
_DSN_PAIR = re.compile(r"^\s*[A-Za-z_]+\s*=")


def without_password(text: str) -> str:
    """A URL or connection string as it may be shown: the password of its userinfo
    replaced (``postgresql://u:***@host/db``, ``u:***@host``; userinfo without a colon,
    often a token, as ``***@host``) and any ``password=...`` pair's value too, whole
    (in a ``key=value`` connection string to the next unescaped space, ``@`` and ``&``
    included). Shows less rather than more when it cannot tell (an ``@`` in a path)."""
    if "://" not in text and _DSN_PAIR.match(text):  # host=... password=...: no userinfo
        return _DSN_PASSWORD.sub(r"\1\2***", text)
    scheme, sep, rest = text.partition("://")
    if not sep:
        scheme, rest = "", text
    if "@" in rest:
        userinfo, _, host = rest.rpartition("@")
        user, colon, _ = userinfo.partition(":")
        rest = f"{user}:***@{host}" if colon else f"***@{host}"
    return _URL_PASSWORD.sub(r"\1\2***", f"{scheme}{sep}{rest}")


def basic_auth(url: str) -> tuple[str, str | None]:
    """``url`` without its userinfo, and the ``Authorization`` header value its userinfo
    means (``Basic`` of ``user:password``, each percent-decoded), None without userinfo.
    Credentials written into an HTTP target's URL (``--base-url http://u:p@host``) are sent
    that way, as the schema registry client sends its own; left in the URL they named no
    host a client could reach (``u:p@host``)."""
    parts = urlsplit(url)
    if parts.username is None:
        return url, None
    netloc = parts.netloc.rpartition("@")[2]
    pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
    return (urlunsplit(parts._replace(netloc=netloc)),
            "Basic " + base64.b64encode(pair.encode()).decode())


# urllib's own message quotes what it took for the port: the password, when the password
# holds an unencoded '#', '/' or '?' (the authority ends there: u:hunter2#x@h:1 is host u,
# port "hunter2").
PORT_NOT_A_NUMBER = ("the base URL's port is not a number (percent-encode a '#', '/' or "
                     "'?' in the password)")


def url_port(parts: SplitResult) -> int | None:
    """``parts.port``; ValueError in a line of its own otherwise, never quoting the URL."""
    try:
        return parts.port
    except ValueError as exc:
        if "out of range" in str(exc):
            raise ValueError("the base URL's port is out of range (0-65535)") from None
        raise ValueError(PORT_NOT_A_NUMBER) from None

"""Flags shared by every subcommand, each with its ``LEDGER_*`` environment fallback."""

from __future__ import annotations

import argparse
import logging
import math
import os
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ledger_stream.config import Settings


class CliError(Exception):
    """A user error: printed as one line, exit status 2, no traceback."""


def add_common_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("common options")
    group.add_argument(
        "--config", metavar="FILE", help="TOML settings file (env: LEDGER_CONFIG)"
    )
    group.add_argument(
        "--bootstrap",
        metavar="HOST:PORT",
        help="use this Kafka cluster instead of the local broker (env: LEDGER_KAFKA_BOOTSTRAP)",
    )
    group.add_argument(
        "--home", metavar="DIR", help="cache for jars, broker data and state (env: LEDGER_HOME)"
    )
    group.add_argument(
        "--topic-prefix", metavar="NAME", help="ledger topic prefix (env: LEDGER_TOPIC_PREFIX)"
    )
    group.add_argument(
        "--log-level", metavar="LEVEL",
        help="DEBUG, INFO, WARNING, ERROR or CRITICAL (env: LEDGER_LOG_LEVEL; default INFO)"
    )


def add_key_flags(parser: argparse.ArgumentParser, surface: str, metrics: bool = True) -> None:
    """The gateway's API key flags, for another surface that reads the ledger over HTTP
    (``surface``, e.g. "the view"), with --no-auth and (``metrics``) --metrics-host."""
    group = parser.add_argument_group("access")
    group.add_argument("--keys", metavar="TENANT=KEY,...",
                       help="API keys, as the gateway's: each reads only its tenant's keys "
                       "(env: LEDGER_API_KEYS; prefer the file or env: flags show in process "
                       "lists)")
    group.add_argument("--keys-file", metavar="FILE",
                       help="API keys, one TENANT=KEY per line (env: LEDGER_API_KEYS_FILE)")
    group.add_argument("--no-auth", action="store_true",
                       help=f"UNAUTHENTICATED: {surface} answers anyone without a key; only "
                       "on a loopback address (for a single-user machine)")
    if metrics:
        add_metrics_host_flag(group)


def add_metrics_host_flag(parser: argparse._ActionsContainer) -> None:
    """``--metrics-host``: metrics answer this host only unless it names another address."""
    parser.add_argument("--metrics-host", metavar="ADDR",
                        help="address /metrics is served to: not a loopback address opens "
                        "it beyond this host, e.g. 0.0.0.0 (env: LEDGER_METRICS_HOST; "
                        "default 127.0.0.1)")


def settings_from(args: argparse.Namespace, **extra: Any) -> Settings:
    """Settings from the common flags plus ``extra`` flag values, env and file."""
    # Here, not at the top: building a parser (``--help``) needs none of them.
    from pydantic import ValidationError
    from pydantic_settings import SettingsError

    from ledger_stream.config import load_settings
    from ledger_stream.kafka.client_config import use_client_settings
    from ledger_stream.settings import ConfigFileError
    from ledger_stream.settings.problems import refused, unparsed

    flags = {"kafka_bootstrap": args.bootstrap, "home": args.home,
             "topic_prefix": args.topic_prefix, "log_level": args.log_level, **extra}
    try:
        settings = load_settings(config_file=args.config, **flags)
    except ValidationError as exc:
        # One line: the setting, where its value came from, what is wrong (no value).
        raise CliError(refused(exc, flags, args.config or os.environ.get("LEDGER_CONFIG"))
                       ) from exc
    except SettingsError as exc:  # an environment variable that is not the JSON it must be
        raise CliError(unparsed(exc, flags, args.config or os.environ.get("LEDGER_CONFIG"))
                       ) from exc
    except ConfigFileError as exc:  # missing, not TOML, or naming an unknown setting
        raise CliError(str(exc)) from exc
    if settings.kafka_bootstrap:
        check_bootstrap(settings.kafka_bootstrap)
    use_client_settings(settings.kafka_client_properties())  # every Kafka client of this command
    # the flag, else LEDGER_LOG_LEVEL or file
    logging.getLogger().setLevel(settings.process.log_level)
    if settings.process.tracing != "off":
        from ledger_stream import tracing

        try:
            tracing.configure(settings.process.tracing)
        except RuntimeError as exc:
            raise CliError(str(exc)) from exc
    return settings


MAX_CELL = 300


def printable(text: str) -> str:
    """``text`` with control characters (tabs, newlines, a terminal's escape sequences)
    shown as escapes."""
    return "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii")
                   for ch in text)


def cell(value: object) -> str:
    """A value as one table cell: '-' for None; control characters (tabs, newlines, a
    terminal's escape sequences) shown as escapes, never acted on; cut at 300 characters,
    saying how many more there were. Keys, details and ids come from the topics, which
    anyone who can produce to them writes."""
    if value is None:
        return "-"
    text = printable(str(value))
    if len(text) > MAX_CELL:
        text = f"{text[:MAX_CELL]}... ({len(text) - MAX_CELL} more characters)"
    return text


def iso_ms(at_ms: int) -> str:
    """A ledger timestamp (ms since the epoch) as UTC ISO 8601 with milliseconds."""
    import time

    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(at_ms / 1000)) + \
        f".{at_ms % 1000:03d}Z"


def port_or_off(text: str) -> str:
    """An argparse type: a TCP port (0: any free port) or ``off``."""
    if text.strip().lower() == "off":
        return "off"
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is neither a port nor off") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a TCP port (0-65535)")
    return str(port)


def checked_key(text: str) -> str:
    """``text`` if it is an operation key; CliError saying why not otherwise."""
    from ledger_stream.domain.keys import InvalidKeyError
    from ledger_stream.domain.keys import checked_key as check

    try:
        return check(text)
    except InvalidKeyError as exc:
        raise CliError(f"{text!r}: {exc}") from exc


MAX_SECONDS = 86_400.0  # a day: a wait or timeout flag's upper bound unless it says more


def _number_type(name: str, convert: Callable[[str], Any], what: str,
                 problem: Callable[[Any, str], str | None]) -> Callable[[str], Any]:
    """An argparse type called ``name`` (argparse names it so in a refusal): ``convert``
    of the text, refused in one line naming the flag when it raises ValueError (the text
    is not ``what``) or when ``problem(value, text)`` says why the value will not do."""
    def parse(text: str) -> Any:
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{printable(text)!r} is not {what}") from None
        wrong = problem(value, text)
        if wrong is not None:
            raise argparse.ArgumentTypeError(wrong)
        return value

    parse.__name__ = name
    return parse


def seconds(*, zero: bool = False, most: float = MAX_SECONDS) -> Callable[[str], float]:
    """An argparse type: a duration in seconds, finite, more than 0 (``zero``: 0 or more,
    for a flag where 0 means "do not wait") and at most ``most``. argparse refuses any
    other value in one line naming the flag (NaN, inf and -1 waited forever or raised)."""
    least = "0 or more" if zero else "more than 0"

    def problem(value: float, text: str) -> str | None:
        if math.isfinite(value) and (value >= 0 if zero else value > 0) and value <= most:
            return None
        return f"{printable(text)!r}: seconds must be {least} and at most {most:g}"

    return _number_type("seconds", float, "a number of seconds", problem)


# HOST[:PORT] or [IPV6][:PORT]: librdkafka takes a host without a port as port 9092.
_HOST_PORT = re.compile(r"(?:[A-Za-z0-9._\-]+|\[[0-9A-Fa-f:.]+\])(?::([0-9]{1,5}))?")


def check_bootstrap(bootstrap: str) -> None:
    """CliError unless ``bootstrap`` is comma-separated HOST[:PORT] entries (an optional
    PROTOCOL:// before each, as librdkafka reads them) of printable ASCII. The refusal
    names the entry's position, not its text: a URL pasted with its credentials
    (``user:password@host:9092``) must not be printed back."""
    entries = bootstrap.split(",")
    for i, entry in enumerate(entries, 1):
        if not entry.strip() and any(e.strip() for e in entries):
            continue  # "a:9092," or "a,,b": librdkafka skips an empty entry
        address = entry.strip().partition("://")[2] or entry.strip()
        found = _HOST_PORT.fullmatch(address)
        if not found or (found.group(1) is not None and not 0 < int(found.group(1)) < 65536):
            raise CliError(f"the Kafka bootstrap (--bootstrap or LEDGER_KAFKA_BOOTSTRAP) must "
                           f"be HOST:PORT entries separated by commas; entry {i} is not")


def shown(text: str) -> str:
    """A URL, DSN or path the user gave, for an error line: quoted, its password
    replaced (``redaction.without_password``), control characters escaped."""
    from ledger_stream.connector.redaction import without_password

    return repr(printable(without_password(text)))


def check_view_url(settings: Settings) -> None:
    """CliError unless the view URL, when one is set (--view-url, LEDGER_VIEW_URL), is one a
    view client can ask: the client's own check, its refusal without the URL's password."""
    if settings.view.url:
        from ledger_stream.sdk.view_client import ViewClient

        try:
            ViewClient(settings.view.url)
        except ValueError as exc:
            raise CliError(f"--view-url (or LEDGER_VIEW_URL): {exc}") from exc


INT32_MAX = 2**31 - 1  # an Avro int: the largest attempt or partition count an event holds


def count(*, least: int = 1, most: int = INT32_MAX) -> Callable[[str], int]:
    """An argparse type: a whole number from ``least`` to ``most``, refused otherwise in one
    line naming the flag (an attempt of -1 or a partition count of 0 reached Kafka)."""
    return _number_type("count", int, "a whole number", lambda value, _text: None if (
        least <= value <= most) else f"{value} is not from {least} to {most}")


def tcp_port(text: str) -> int:
    """An argparse type: a TCP port to connect to, 1 to 65535."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{printable(text)!r} is not a port") from None
    if not 0 < port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a TCP port (1-65535)")
    return port


# local@domain: both parts present, no space, no control character (a CR or LF in an
# envelope address or a From header would start another SMTP command or header line).
_MAIL_ADDRESS = re.compile(r"[^@\s\x00-\x1f\x7f]+@[^@\s\x00-\x1f\x7f]+")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def mail_address(text: str) -> str:
    """An argparse type: a mail address, ``local@domain`` or with a display name, ``Ledger
    Bot <local@domain>`` (as smtplib sends it: the address in MAIL FROM, the whole in the
    From header). Only the address part is checked as an address; a control character (CR,
    LF) is refused anywhere. An empty sender was refused by the server only when the first
    mail was sent."""
    from email.utils import parseaddr

    address = parseaddr(text)[1]
    whole = text.strip() == address or text.rstrip().endswith(f"<{address}>")
    if _CONTROL.search(text) or not whole or not _MAIL_ADDRESS.fullmatch(address):
        raise argparse.ArgumentTypeError(
            f"{printable(text)!r} is not a mail address (local@domain or "
            "'Name <local@domain>', no spaces in the address)")
    return text


def nonblank(text: str) -> str:
    """An argparse type: a value that is not empty or only spaces."""
    if not text.strip():
        raise argparse.ArgumentTypeError("must not be empty")
    return text


def kafka_failure(exc: BaseException, doing: str) -> CliError:
    """The CliError for a KafkaException a command caught while ``doing`` (e.g. "cannot
    read receipts"): a client that refused its configuration is said as every command says
    it (``kafka.exceptions.client_config_refusal``: the property, never its value), any other
    error with librdkafka's own text after ``doing``."""
    from ledger_stream.kafka.exceptions import client_config_refusal, kafka_error_text

    refusal = client_config_refusal(exc)
    return CliError(refusal if refusal is not None else f"{doing}: {kafka_error_text(exc)}")

"""An operator's free text (a freeze's reason, a reconciliation decision's reason) goes to
the audit trail and the attempts topic and stays there for as long as they keep records:
it must hold no payment detail. A card number is the one such detail a machine can tell
with confidence: 13 to 19 digits that begin as the card brands' numbers begin (2 to 6:
Mastercard's 2-series, Amex, Diners and JCB, Visa, Mastercard, Discover and UnionPay) and
pass the Luhn check, the card networks' own check digit, read as a person reads the text
(any script's digits, invisible characters between them dropped). Tried are whole groups of
a run of digits (groups parted by one to three spaces, tabs, line breaks, dots, slashes,
underscores or dashes, not commas, so a CVV, an expiry or an amount beside a card does not
hide it), and every window of 13 to 19 digits inside one
group, so a card glued to other digits ("ref 0004111111111111111", "4111111111111111999")
is seen too. About one in ten other numbers of that form passes (an order number
"3000000000000004"), and a longer group is refused more often, for it holds more windows:
of 100,000 random groups, 93% of those of 20 to 30 digits and 45% of those of 14 to 19
(5% of those of 13, as with whole groups only). Refused alike: the operator is told to
write the reason without the number, and never shown it. Windows across the groups of a
run are not tried: they refused 89% of a date beside a millisecond timestamp
("2026-12-07 1765097155000"), so a card with digits glued to its first or last group
("04111 1111 1111 1111") is left to the operator. Account numbers, names and addresses
cannot be told from other text: the help and the docs ask operators to leave them out."""

from __future__ import annotations

import re
import unicodedata

# What people put between a card number's groups: any white space (a tab, a line break, a
# no-break or thin space), dots, slashes, underscores, dashes; one to three of them
# ("4111 - 1111 - 1111 - 1111"). Not commas: amounts are written with them ("9,515.43"),
# and lists of amounts or order numbers parted by them were refused one time in four.
_SEPARATOR = "[\\s./_\\-\u2013\u2014]"
# A run of digit groups (leftmost and longest, so it starts and ends at a non-digit).
_DIGIT_RUNS = re.compile(rf"\d+(?:{_SEPARATOR}{{1,3}}\d+)*")
_GROUP_BREAK = re.compile(rf"{_SEPARATOR}+")
_BRANDS = frozenset("23456")


def _luhn(digits: str) -> bool:
    total = 0
    for position, char in enumerate(reversed(digits)):
        value = int(char)
        if position % 2:
            value = value * 2 - 9 if value > 4 else value * 2
        total += value
    return total % 10 == 0


def holds_card_number(text: str) -> bool:
    """Whether ``text`` holds what looks like a card number (see the module docstring)."""
    for found in _DIGIT_RUNS.finditer(_as_shown(text)):
        groups = _GROUP_BREAK.split(found.group())
        # The card may be a few of the run's groups: a CVV, an expiry or an amount may
        # stand beside it ("4111 1111 1111 1111 123", "charge 12 4111 ...").
        for first in range(len(groups)):
            digits = ""
            for group in groups[first:]:
                digits += group
                if len(digits) > 19:
                    break
                if _card(digits):
                    return True
        # Or glued to other digits in one group ("ref 0004111111111111111"): every window.
        if any(_card(group[start:end]) for group in groups if len(group) > 13
               for start in range(len(group) - 12)
               for end in range(start + 13, min(start + 19, len(group)) + 1)):
            return True
    return False


def _as_shown(text: str) -> str:
    """``text`` as a reader sees it: compatibility forms as the characters they show
    (fullwidth digits, a no-break space), what shows nothing of its own dropped (a
    zero-width space, a soft hyphen, a combining mark between groups), and every script's
    decimal digits as ASCII ones (Arabic-Indic, Devanagari, ...)."""
    shown = unicodedata.normalize("NFKC", text)
    if shown.isascii():
        return shown
    return "".join(_ascii_digit(char) for char in shown
                   if unicodedata.category(char) not in _UNSEEN)


# Characters that show nothing of their own between digits: format characters (a zero-width
# space, a soft hyphen) and marks (a combining grapheme joiner, a variation selector).
_UNSEEN = frozenset(("Cf", "Mn", "Me"))


def _ascii_digit(char: str) -> str:
    value = unicodedata.decimal(char, None)
    return char if value is None else str(value)


def _card(digits: str) -> bool:
    return 13 <= len(digits) <= 19 and digits[0] in _BRANDS and _luhn(digits)


def payment_detail_problem(what: str, text: str) -> str | None:
    """Why ``text`` (named ``what``, e.g. "the reason") cannot be recorded, or None."""
    if holds_card_number(text):
        return (f"{what} holds what looks like a card number (13 to 19 digits passing the "
                "card networks' check, alone or inside a longer number): write it without "
                "that number, and leave payment details out of the audit trail")
    return None

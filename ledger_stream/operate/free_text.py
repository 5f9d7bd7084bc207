"""An operator's free text (a freeze's reason, a reconciliation decision's reason) goes to
the audit trail and the attempts topic and stays there for as long as they keep records:
it must hold no payment detail. A card number is the one such detail a machine can tell
with confidence: 13 to 19 digits (single spaces or dashes between them allowed) that begin
as the card brands' numbers begin (2 to 6: Mastercard's 2-series, Amex, Diners and JCB,
Visa, Mastercard, Discover and UnionPay) and pass the Luhn check, the card networks' own
check digit. A text holding one is refused, never echoed. Account numbers, names and
addresses cannot be told from other text: the help and the docs ask operators to leave
them out."""

from __future__ import annotations

import re

# Digit runs of 13 to 19 digits, each digit followed by at most one space or dash.
_DIGIT_RUNS = re.compile(r"(?<!\d)(?:\d[ -]?){12,18}\d(?!\d)")
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
    for found in _DIGIT_RUNS.finditer(text):
        digits = re.sub(r"[ -]", "", found.group())
        if digits[0] in _BRANDS and _luhn(digits):
            return True
    return False


def payment_detail_problem(what: str, text: str) -> str | None:
    """Why ``text`` (named ``what``, e.g. "the reason") cannot be recorded, or None."""
    if holds_card_number(text):
        return (f"{what} holds what looks like a card number (13 to 19 digits passing the "
                "card networks' check): leave payment details out of the audit trail")
    return None

"""An operator's reason never carries a card number into the audit trail (found by the
hostile review of 2026-12-07: `freeze refund --reason "card 4111111111111111"` was
recorded, though the help says "no payment details"). Refused before anything is sent:
no broker here (127.0.0.1:1 answers nothing, and nothing gets as far as asking)."""

from __future__ import annotations

import pytest

from ledger_stream.cli.main import main
from ledger_stream.config import Settings
from ledger_stream.domain import events as ev
from ledger_stream.operate import Actor, DecisionRefused, record_decision
from ledger_stream.operate.containment import ContainmentRefused, checked, send
from ledger_stream.operate.free_text import holds_card_number
from ledger_stream.serde import AvroCodec

pytestmark = pytest.mark.timeout(30)

NOWHERE = "127.0.0.1:1"


@pytest.mark.parametrize("text", [
    "card 4111111111111111 declined",  # Visa's test number
    "customer said 5500 0000 0000 0004",  # Mastercard, in groups of four
    "amex 3400-000000-00009",  # Amex, dashed
    "2223000048400011",  # Mastercard's 2-series
    "6011111111111117 and more",  # Discover
    "x4111111111111111x",  # glued to letters
    # Beside other digits, or parted otherwise (found by the review of this check):
    "card 4111 1111 1111 1111 123",  # a CVV after it
    "4111 1111 1111 1111 12 25",  # an expiry
    "charge 12 4111 1111 1111 1111",  # an amount before it
    "4111111111111111-12",
    "4111.1111.1111.1111",
    "4111  1111  1111  1111",
    "4111\u00a01111\u00a01111\u00a01111",  # no-break spaces
    "4111\u20131111\u20131111\u20131111",  # en dashes
    "\uff14\uff11\uff11\uff11\uff11\uff11\uff11\uff11\uff11\uff11\uff11\uff11"
    "\uff11\uff11\uff11\uff11",  # fullwidth digits
    # Glued to other digits in one group (found by the hostile review of this check):
    "ref 0004111111111111111",
    "4111111111111111999",
    "94111111111111111",
    "41111111111111111111",  # 20 digits: a card's 16 inside
    "txn 12345550000000000004 ok",  # Mastercard's test number mid-group
    # Parted or written otherwise (found by the hostile review of the gateway):
    "card 4111 - 1111 - 1111 - 1111 bounced",
    "4111\t1111\t1111\t1111",
    "4111\n1111\n1111\n1111",
    "4111/1111/1111/1111",
    "4111_1111_1111_1111",
    "4111\u200b1111\u200b1111\u200b1111",  # zero-width spaces: shown as one number
    "4111\u00ad1111\u00ad1111\u00ad1111",  # soft hyphens
    "4\u034f111 1111 1111 1111",  # a combining grapheme joiner
    "4111\ufe0f1111\ufe0f1111\ufe0f1111",  # variation selectors
    "\u0664" + "\u0661" * 15,  # Arabic-Indic digits
    "\u096a\u0967\u0967\u0967 " + "\u0967\u0967\u0967\u0967 " * 3,  # Devanagari, grouped
])
def test_a_card_number_is_seen(text: str) -> None:
    assert holds_card_number(text)


@pytest.mark.parametrize("text", [
    "4111111111111112",  # fails the check digit
    "ticket 1765097155000 closed",  # a timestamp in ms: no brand starts with 1
    "at 1765097155003",  # one that passes the check digit: still no brand's
    "batch 900000000000001",  # passes it, starts with 9
    "order 123456789012",  # 12 digits: too short for a card
    "90000000000000001000",  # a longer group none of whose windows is a brand's card
    "2026-12-07 1765097155000",  # a date beside a timestamp: no window across groups
    "at 1765097155003 12 25",  # groups that pass nowhere
    "attempt 2 of acme/refund/inv-881 at 2026-12-07",
    "refunds 12, 40 and 7 of 2026/12/07, 3 of them late",
    # Amounts and lists parted by commas (found by the review of that change: 28% refused):
    "refund amounts 9,515.43 / 6,304.93 / 8,220.28",
    "orders 40550, 55311, 40260, 98715",
    "\u0661\u0662\u0663 \u200b",  # a few Arabic-Indic digits
    "",
])
def test_other_text_is_not(text: str) -> None:
    assert not holds_card_number(text)


def test_a_freeze_and_a_version_hold_refuse_a_card_number_in_their_reason() -> None:
    with pytest.raises(ContainmentRefused, match="looks like a card number") as refused:
        checked("refund", "acme", "customer card 4111 1111 1111 1111")
    assert "4111" not in str(refused.value)
    with pytest.raises(ContainmentRefused, match="looks like a card number"):
        send(Settings(), NOWHERE, AvroCodec(), action="", tenant="", frozen=True,
             actor=Actor("ops-ann", "operator", "host:test"), reason="card 4111111111111111",
             workflow=("refund-agent", "2.0"))
    checked("refund", "acme", "deploy 3.0, ticket 1765097155000")  # passes


def test_a_decision_refuses_a_card_number_in_its_reason() -> None:
    with pytest.raises(DecisionRefused, match="looks like a card number") as refused:
        record_decision(Settings(), NOWHERE, AvroCodec(), key="acme/refund/inv-1", attempt=1,
                        resolution=ev.Resolution.NOT_APPLIED,
                        actor=Actor("ops-ann", "operator", "host:test"),
                        reason="refunded by hand to 5500000000000004", decision_id="d-1")
    assert "5500" not in str(refused.value)


def test_the_freeze_command_says_so_in_one_line(monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("LEDGER_DEV_MODE", "1")
    assert main(["freeze", "refund", "--reason", "card 4111111111111111",
                 "--bootstrap", NOWHERE]) == 2
    err = capsys.readouterr().err
    assert "looks like a card number" in err and "4111" not in err and err.count("\n") == 1

"""What the CLI's tables print of values read from the topics: one line per row, never a
terminal's escape sequence acted on, long text cut saying so."""

from __future__ import annotations

from ledger_stream.cli.common import MAX_CELL, cell


def test_control_characters_are_shown_not_acted_on() -> None:
    hostile = "late\tby\n2 s\x1b[2J\x1b]0;pwned\x07\r"
    shown = cell(hostile)
    assert shown == "late\\tby\\n2 s\\x1b[2J\\x1b]0;pwned\\x07\\r"
    assert shown.isprintable()


def test_long_text_is_cut_saying_how_much_and_none_is_a_dash() -> None:
    assert cell("é" * (MAX_CELL + 5)) == "é" * MAX_CELL + "... (5 more characters)"
    assert cell(None) == "-" and cell(0) == "0"

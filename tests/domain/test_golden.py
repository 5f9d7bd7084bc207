"""Every row of the decision table decides exactly as recorded: all output fields and the
next state (tests/domain/golden.py). A change here must be a deliberate one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ledger_stream.serde import AvroCodec
from tests.domain.golden import decided
from tests.domain.protocol_doc import ROWS

pytestmark = pytest.mark.timeout(30)

GOLDEN = Path(__file__).with_name("golden.json")


@pytest.mark.parametrize("index", range(len(ROWS)), ids=[row.event for row in ROWS])
def test_the_row_decides_as_recorded(index):
    recorded = json.loads(GOLDEN.read_text())[index]
    # Only this row is decided here, so a mutation tester maps each row's code to its test.
    assert decided(ROWS[index]) == recorded, (
        "decide changed: check the difference, then "
        "python -m tests.domain.golden > tests/domain/golden.json")


def test_every_output_of_every_row_is_a_valid_event_on_the_wire():
    from tests.domain.protocol_doc import _run

    codec = AvroCodec()
    for row in ROWS:
        _, _, outputs = _run(row)
        for out in outputs:
            assert codec.decode(codec.encode(out)) == out, row.event

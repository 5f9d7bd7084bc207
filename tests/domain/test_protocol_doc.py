"""docs/protocol.md is exactly what the decision core does now."""

from pathlib import Path

import pytest

from tests.domain.protocol_doc import document

pytestmark = pytest.mark.timeout(30)


def test_protocol_doc_matches_the_code():
    doc = Path(__file__).resolve().parents[2] / "docs" / "protocol.md"
    assert doc.read_text() == document(), (
        "docs/protocol.md is stale: python -m tests.domain.protocol_doc > docs/protocol.md")

"""API keys: each acts for one tenant; a malformed configuration says where."""

from __future__ import annotations

import pytest

from ledger_stream.gateway import ApiKeyError, ApiKeys


def test_each_key_acts_for_its_tenant_only():
    keys = ApiKeys.parse("acme=acme-key-0123456789,globex=globex-key-0123456789")
    assert keys.tenant_of("acme-key-0123456789") == "acme"
    assert keys.tenant_of("globex-key-0123456789") == "globex"
    assert keys.tenant_of("acme-key-012345678") is None


@pytest.mark.parametrize("text,why", [
    ("acme=shared-key-0123456789,globex=shared-key-0123456789", "one API key is given"),
    ("acme=short", "shorter than 16"),
    ("acme", "not TENANT=KEY"),
    ("a/b=acme-key-0123456789", "tenant 'a/b'"),
    ("", "no API keys"),
])
def test_a_bad_key_configuration_says_what_is_wrong(text, why):
    with pytest.raises(ApiKeyError, match=why):
        ApiKeys.parse(text)

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
    ("acme:admin=acme-key-0123456789", "the only role a key may be limited to is 'agent'"),
])
def test_a_bad_key_configuration_says_what_is_wrong(text, why):
    with pytest.raises(ApiKeyError, match=why):
        ApiKeys.parse(text)


def test_a_key_given_as_an_agents_is_limited_and_the_others_are_not():
    keys = ApiKeys.parse("acme=acme-key-0123456789\nacme:agent=acme-agent-0123456789")
    assert keys.tenant_of("acme-agent-0123456789") == "acme"
    assert keys.is_agents("acme-agent-0123456789")
    assert not keys.is_agents("acme-key-0123456789")

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
    ("acme", "not TENANT:operator:NAME=KEY"),
    ("a/b=acme-key-0123456789", "tenant 'a/b'"),
    ("", "no API keys"),
    ("acme:admin=acme-key-0123456789", "not 'acme:admin'"),
    ("acme:operator=acme-key-0123456789", "names the operator"),
    ("acme:operator:a b=acme-key-0123456789", "names the operator"),
    ("acme:operator:ann=acme-key-0123456789,acme:agent=acme-key-0123456789", "one holder"),
    ("acme:operator:ann=acme-key-0123456789,acme:operator:bob=acme-key-0123456789",
     "two holders"),
    # A key listed as an agent's (no role) and as an operator's is refused, in either
    # order: it was silently an operator's, its "agent" line notwithstanding.
    ("acme=acme-key-0123456789,acme:operator:ann=acme-key-0123456789", "one holder"),
    ("acme:operator:ann=acme-key-0123456789,acme=acme-key-0123456789", "one holder"),
    # The ledger keys its freezes' audit records ~freeze/TENANT/ACTION: a tenant "~freeze"
    # would read every tenant's as its own keys' timelines. '*' is every tenant's scope.
    ("~freeze:agent=acme-key-0123456789", "tenant '~freeze'"),
    ("~containment=acme-key-0123456789", "tenant '~containment'"),
    ("*:operator:ann=acme-key-0123456789", "tenant '\\*'"),
    # `ledger-stream watch` files an effect made around the ledger that maps to no key
    # under unmapped/<target>/<hash>, every tenant's: a tenant "unmapped" would read them.
    ("unmapped:agent=acme-key-0123456789", "tenant 'unmapped'"),
    ("unmapped:operator:ann=acme-key-0123456789", "tenant 'unmapped'"),
    ("unmapped=acme-key-0123456789", "tenant 'unmapped'"),
    # An agent's key names no one: a name after it is a mistake, not an agent called bob.
    ("acme:agent:bob=acme-key-0123456789", "not 'acme:agent:bob'"),
    ("=acme-key-0123456789", "not TENANT:operator:NAME=KEY"),
])
def test_a_bad_key_configuration_says_what_is_wrong(text, why):
    with pytest.raises(ApiKeyError, match=why):
        ApiKeys.parse(text)


def test_the_same_entry_twice_is_one_key():
    keys = ApiKeys.parse("acme:operator:ann=acme-key-0123456789\n"
                         "acme:operator:ann=acme-key-0123456789")
    assert keys.holder_of("acme-key-0123456789").operator == "ann"  # type: ignore[union-attr]
    assert not keys.is_agents("no-such-key-0123456789")


def test_only_a_key_naming_its_operator_reaches_the_operator_routes():
    keys = ApiKeys.parse("acme:operator:ops-ann=acme-key-0123456789\n"
                         "acme:agent=acme-agent-0123456789\nacme=acme-old-0123456789")
    assert keys.tenant_of("acme-agent-0123456789") == "acme"
    assert keys.is_agents("acme-agent-0123456789")
    assert not keys.is_agents("acme-key-0123456789")
    # A key without a role names no one to audit: an agent's, and a startup warning.
    assert keys.is_agents("acme-old-0123456789") and keys.unnamed == ("--keys item 3",)
    holder = keys.holder_of("acme-key-0123456789")
    assert holder is not None and (holder.tenant, holder.operator) == ("acme", "ops-ann")
    assert holder.key_id.startswith("key:") and "acme-key" not in holder.key_id
    assert keys.holder_of("acme-agent-0123456789").operator == ""  # type: ignore[union-attr]

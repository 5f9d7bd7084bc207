"""Targets the connector runtime applies effects to.

Each module is one kind of external system implementing
``ledger_stream.connector.target.Target``; importing this package imports none of them, so
a client library is needed only by the module that uses it (psycopg for ``postgres``).

- ``connectors.http``: HTTP APIs that take an idempotency key header.
- ``connectors.postgres``: ``PostgresTarget``, an effect and its receipt row committed in
  one transaction; deduplicates by operation key and can be looked up.
- ``connectors.smtp``: ``SmtpTarget``, one mail per call; no deduplication, no lookup.
"""

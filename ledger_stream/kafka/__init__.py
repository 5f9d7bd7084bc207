"""Kafka plumbing: the ledger's topics, the local development broker and bootstrap lookup.

``topics`` declares the ledger topics (docs/design.md) and creates them idempotently;
``local`` fetches Apache Kafka from Maven Central and runs it on the machine's Java;
``bootstrap`` answers "which cluster does this command talk to".
"""

"""Kafka plumbing: the ledger's topics, clients, partitioner and bootstrap lookup.

``topics`` declares the ledger topics (docs/design.md) and creates them idempotently;
``bootstrap`` answers "which cluster does this command talk to" (a local development
broker is the lab's: ``ledger_lab.local_kafka``).
"""

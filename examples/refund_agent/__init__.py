"""A refund agent whose refund goes through the ledger (see README.md in this folder)."""

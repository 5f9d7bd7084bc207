"""Errors of the state stores. Library errors (RocksDB's) are wrapped with ``from exc``."""

from __future__ import annotations


class StoreError(Exception):
    """A state store could not be opened, read or written."""


class StateFolderLocked(StoreError):
    """Another live process holds the state folder: two processors on one folder would share
    a transactional id and fence each other, and write one RocksDB from two processes."""

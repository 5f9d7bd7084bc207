"""Proving the ledger holds under hostile input and faults: the fuzzer."""

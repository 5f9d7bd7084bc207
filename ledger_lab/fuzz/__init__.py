"""Proving the ledger holds under hostile input and faults (issue 12): the fuzzer."""

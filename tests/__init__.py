"""The suite runs the pure decision core, the reference, unless LEDGER_CORE says otherwise:
a test that patches a domain function reaches only the pure core's callers (compiled code
calls its own functions directly). tests/compiled runs the compiled core against it, each in
its own process, byte for byte. Set here, before anything imports ledger_stream."""

import os

os.environ.setdefault("LEDGER_CORE", "pure")

"""The ``ledger-stream`` command line."""

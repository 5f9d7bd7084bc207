"""The lab's commands: registered on the ``ledger-stream`` command through the
``ledger_stream.commands`` entry points."""

"""``python -m ledger_stream.sandbox``: the same flags as ``ledger-stream sandbox``."""

import sys

from ledger_stream.cli.sandbox_cmd import main

if __name__ == "__main__":
    sys.exit(main())

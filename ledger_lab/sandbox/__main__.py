"""``python -m ledger_lab.sandbox``: the same flags as ``ledger-stream sandbox``."""

import sys

from ledger_lab.cli.sandbox_cmd import main

if __name__ == "__main__":
    sys.exit(main())

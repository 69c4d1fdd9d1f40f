"""``python -m core.cli``: the ``keel`` command without the console script installed."""

import sys

from core.cli import main

if __name__ == "__main__":
    sys.exit(main())

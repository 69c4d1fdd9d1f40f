"""``python -m core.cli``: the ``keel`` command without the console script installed."""

import sys

from core.cli import main

sys.exit(main())

"""One Keel process on the project root given as the first argument: what ``main.py`` does, for a
temporary root. The scale-out tests start several of these side by side."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from core import Kernel  # noqa: E402

if __name__ == "__main__":
    sys.exit(Kernel(sys.argv[1]).run())

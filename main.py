"""Keel's entry point: build the Kernel for this project and run it. It never needs to change."""

import sys

from core import Kernel

if __name__ == "__main__":
    sys.exit(Kernel().run(sys.argv[1:]))

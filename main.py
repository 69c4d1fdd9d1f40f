"""Keel's entry point: ``python main.py`` boots and serves this project; ``python main.py <command>``
is the ``keel`` command (:mod:`core.cli`) on this project: ``migrate``, ``users create``, ``new``,
``routes``, ``check``, ``doctor``, ``status``... (``python main.py --help`` lists them).
"""

import sys
from pathlib import Path

from core.cli import main

if __name__ == "__main__":
    sys.exit(main(["--root", str(Path(__file__).resolve().parent), *(sys.argv[1:] or ["run"])]))

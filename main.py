"""Keel's entry point: build the Kernel for this project and run it.

``python main.py users ...`` manages accounts (``domains/users/commands.py``); everything else is
the Kernel's (``serve``, ``migrate``).
"""

import sys

from core import Kernel

if __name__ == "__main__":
    if sys.argv[1:2] == ["users"]:
        from domains.users.commands import main as users

        sys.exit(users(sys.argv[2:]))
    sys.exit(Kernel().run(sys.argv[1:]))

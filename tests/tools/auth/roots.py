"""``make_linked_root`` is ``tests.kit.make_root``: kept only for the suites that still import it by
this name (store, checkpoint, llm). New code imports ``make_root`` from ``tests.kit``."""

from __future__ import annotations

from tests.kit import make_root as make_linked_root

__all__ = ["make_linked_root"]

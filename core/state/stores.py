"""The in-process reference stores, gathered at the path applications import them from.

``InMemoryStore`` (``StorePort``), ``InMemoryVector`` (``VectorPort``) and
``InMemoryCheckpointStore`` (``CheckpointPort``) are production code for a single machine, and the
behaviour the networked backends under ``tools/`` are measured against.
"""

from core.state.checkpoints import CheckpointVersionConflict, InMemoryCheckpointStore
from core.state.kv import InMemoryStore
from core.state.vector import InMemoryVector

__all__ = ["CheckpointVersionConflict", "InMemoryCheckpointStore", "InMemoryStore", "InMemoryVector"]

"""State a run keeps or recalls: the in-process reference stores and the memory vocabulary.

``core.state.stores`` holds ``InMemoryStore``, ``InMemoryVector`` and ``InMemoryCheckpointStore``;
``core.state.memory`` holds ``MemoryItem`` and the ``MemorySource`` protocol.
"""

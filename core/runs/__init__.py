"""The durable-run runtime: agent runs that are checkpointed at every step, leased to one process
at a time, followed as events, cancelled, and resumed by another process after a crash.

It talks only to ports (``checkpoint``, ``store``, a ``db`` for the run index, a tracer) and imports
only the standard library and ``core``; the HTTP surface over it lives in the agents domain.
"""

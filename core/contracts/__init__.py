"""The agent kernel's vocabulary: value types, ports, the middleware contract and errors.

This package holds no I/O, no policy and no loop; it imports only the standard library and
nothing from the rest of ``core`` except ``core.serialization``.
"""

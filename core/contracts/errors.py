"""Keel's error base.

Every typed error Keel raises inherits :class:`KeelError`, so an application that wants a single
boundary catches that one name.
"""


class KeelError(Exception):
    """The single base of Keel's own typed errors."""

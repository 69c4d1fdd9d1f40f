"""The backend of a ``store`` tool that has no usable one: every operation says why.

Used before ``setup()`` and when ``STORE_URL`` could not be understood, so a misconfigured store
fails loudly (``StoreBackendUnavailable`` with the reason) instead of quietly keeping values in
memory.
"""

from __future__ import annotations

from typing import NoReturn

from .errors import StoreBackendUnavailable


class NotReadyBackend:
    def __init__(self, reason: str) -> None:
        self.reason = reason

    def describe(self) -> str:
        return self.reason

    def _fail(self) -> NoReturn:
        raise StoreBackendUnavailable(self.reason)

    async def open(self) -> None:
        return None

    async def close(self) -> None:
        return None

    async def ping(self) -> bool:
        return False

    async def lookup(self, scope: str, key: str) -> str | None:
        self._fail()

    async def put(self, scope: str, key: str, text: str, ttl: float | None) -> None:
        self._fail()

    async def delete(self, scope: str, key: str) -> None:
        self._fail()

    async def add(self, scope: str, key: str, text: str, ttl: float | None) -> str | None:
        self._fail()

    async def append(self, scope: str, key: str, item: str) -> None:
        self._fail()

    async def increment(self, scope: str, key: str, by: int, ttl: float | None) -> int:
        self._fail()

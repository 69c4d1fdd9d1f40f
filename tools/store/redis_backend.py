"""``redis://...``: the store in Redis, shared by every Keel process (redis-py's asyncio client).

Each (scope, key) is one Redis string ``<STORE_KEY_PREFIX><scope>:<key>`` holding the JSON text,
with Redis's own expiry (``PX``, rounded up to the millisecond). The operations that read and
change a value run inside Redis, atomically:

* ``add`` is ``SET ... NX``; when the key exists, its value is read back (and the attempt repeated
  if it expired in between);
* ``append`` is a small Lua script that splices the item into the array's text and keeps the
  key's expiry (``KEEPTTL``, Redis 6 and later); text that is not an array is refused;
* ``increment`` is a Lua script around ``INCRBY``, which works on the JSON text of an integer and
  refuses anything else (``"2.0"``, ``"true"``, a quoted string); the expiry is set only when the
  increment created the counter.

A server that cannot be reached (or times out, ``STORE_CONNECT_TIMEOUT``) is
``StoreBackendUnavailable``; the client retries a dropped connection once, without waiting.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from .backend import NotACounter, NotAList, ttl_milliseconds
from .errors import StoreBackendUnavailable

T = TypeVar("T")

APPEND = """
local current = redis.call('GET', KEYS[1])
if not current then
    redis.call('SET', KEYS[1], '[' .. ARGV[1] .. ']')
    return 1
end
if string.sub(current, 1, 1) ~= '[' then
    return redis.error_reply('KEEL_NOT_A_LIST')
end
if current == '[]' then
    current = '[' .. ARGV[1] .. ']'
else
    current = string.sub(current, 1, -2) .. ',' .. ARGV[1] .. ']'
end
redis.call('SET', KEYS[1], current, 'KEEPTTL')
return 1
"""

INCREMENT = """
local existed = redis.call('EXISTS', KEYS[1])
local total = redis.call('INCRBY', KEYS[1], ARGV[1])
if existed == 0 and ARGV[2] ~= '' then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return total
"""


class RedisBackend:
    def __init__(self, url: str, *, prefix: str = "keel:store:", connect_timeout: float = 5.0) -> None:
        self.url = url
        self.prefix = prefix
        self._client = aioredis.Redis.from_url(
            url,
            decode_responses=True,
            socket_connect_timeout=connect_timeout,
            socket_timeout=connect_timeout,
            retry=Retry(NoBackoff(), 1),
        )
        self._append = self._client.register_script(APPEND)
        self._increment = self._client.register_script(INCREMENT)

    def describe(self) -> str:
        return f"redis (keys prefixed {self.prefix!r})"

    def name(self, scope: str, key: str) -> str:
        return f"{self.prefix}{scope}:{key}"

    async def open(self) -> None:
        await self._call(self._client.ping)

    async def close(self) -> None:
        await self._client.aclose()

    async def _call(self, command: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any) -> T:
        try:
            return await command(*args, **kwargs)
        except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
            raise StoreBackendUnavailable(f"the store's Redis is unreachable: {exc}") from exc
        except ResponseError as exc:
            text = str(exc)
            if "KEEL_NOT_A_LIST" in text:
                raise NotAList from None
            if "not an integer" in text or "overflow" in text:
                raise NotACounter from None
            raise StoreBackendUnavailable(f"the store's Redis refused the operation: {exc}") from exc
        except RedisError as exc:
            raise StoreBackendUnavailable(f"the store's Redis failed: {exc}") from exc

    async def ping(self) -> bool:
        return bool(await self._call(self._client.ping))

    async def lookup(self, scope: str, key: str) -> str | None:
        value = await self._call(self._client.get, self.name(scope, key))
        return None if value is None else str(value)

    async def put(self, scope: str, key: str, text: str, ttl: float | None) -> None:
        px = ttl_milliseconds(ttl) if ttl is not None else None
        await self._call(self._client.set, self.name(scope, key), text, px=px)

    async def delete(self, scope: str, key: str) -> None:
        await self._call(self._client.delete, self.name(scope, key))

    async def add(self, scope: str, key: str, text: str, ttl: float | None) -> str | None:
        name = self.name(scope, key)
        px = ttl_milliseconds(ttl) if ttl is not None else None
        for _ in range(5):
            if await self._call(self._client.set, name, text, px=px, nx=True):
                return None
            current = await self._call(self._client.get, name)
            if current is not None:
                return str(current)
        raise StoreBackendUnavailable(f"the store kept losing the race to create {key!r}")

    async def append(self, scope: str, key: str, item: str) -> None:
        await self._call(self._append, keys=[self.name(scope, key)], args=[item])

    async def increment(self, scope: str, key: str, by: int, ttl: float | None) -> int:
        px = str(ttl_milliseconds(ttl)) if ttl is not None else ""
        total = await self._call(self._increment, keys=[self.name(scope, key)], args=[by, px])
        return int(total)

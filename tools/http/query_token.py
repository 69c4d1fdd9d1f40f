"""Takes an ``?access_token=`` out of a request's query string before anything writes the URL down.

Event-stream endpoints accept their bearer token as a query parameter, because a browser's
``EventSource`` cannot send headers. Everything that records a request's URL reads the ASGI scope's
``query_string``: uvicorn's access log, the OpenTelemetry request span, the ``query`` a handler finds
in its context (and may log). So as a request enters the app its token's value moves to
``scope[ACCESS_TOKEN_KEY]`` and the query string keeps the parameter with the value ``REDACTED``;
every other byte of the query string stays as it was. The endpoint reader takes the token from
that scope key, never from the query.

The choices:

- A parameter is the token when its name decodes to ``access_token`` (``access%5Ftoken`` too),
  splitting on ``&`` only: the same reading as the query parser, so no spelling that the parser
  would see as ``access_token`` is left in the URL.
- Its value is decoded like every query value (``%xx`` as UTF-8, ``+`` as a space).
- A repeated ``access_token`` is ambiguous: every occurrence is redacted and none is taken as the
  token. An empty value is no token.
- The name is redacted on every route, not only on event streams (this runs before routing): a
  JSON endpoint sees ``"REDACTED"`` in its ``data`` and never a credential; only event streams
  authenticate with it.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any
from urllib.parse import unquote_plus

ACCESS_TOKEN_KEY = "keel.access_token"
ACCESS_TOKEN = "access_token"
REDACTED = b"REDACTED"
_RAW_NAME = ACCESS_TOKEN.encode()


def _decoded(raw: bytes) -> str:
    return unquote_plus(raw.decode("latin-1"), errors="replace")


def lift_access_token(scope: MutableMapping[str, Any]) -> None:
    """Move the query's ``access_token`` value to ``scope[ACCESS_TOKEN_KEY]``, leaving ``REDACTED``.

    The key is absent when the query has no such parameter, and ``None`` when it has no usable one.
    """
    if ACCESS_TOKEN_KEY in scope:  # lifted already: the query now says REDACTED
        return
    query_string: bytes = scope.get("query_string", b"")
    # Without a literal name or any escape, no parameter can be read as the token: the common case.
    if not query_string or (_RAW_NAME not in query_string and b"%" not in query_string):
        return
    parts = query_string.split(b"&")
    values: list[str] = []
    for index, part in enumerate(parts):
        name, _, value = part.partition(b"=")
        if name != _RAW_NAME and (b"%" not in name or _decoded(name) != ACCESS_TOKEN):
            continue
        values.append(_decoded(value))
        parts[index] = name + b"=" + REDACTED
    if not values:
        return
    scope["query_string"] = b"&".join(parts)
    scope[ACCESS_TOKEN_KEY] = values[0] if len(values) == 1 and values[0] else None

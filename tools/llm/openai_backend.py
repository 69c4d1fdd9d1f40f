"""The model behind ``LLM_PROVIDER=openai``: any server speaking OpenAI's chat-completions API.

One ``httpx.AsyncClient`` per tool (a connection pool reused by every call) posts a streaming
request to ``<LLM_BASE_URL>/chat/completions`` and reads the answer line by line
(:mod:`tools.llm.chat_stream`). Its job here is the transport: the status line, and turning every
``httpx`` failure into an :class:`~tools.llm.errors.LLMError` of the right reason (see that module
for which reasons are retried). An error status is read (the first few kilobytes) so the server's
own explanation reaches the message; ``Retry-After`` on a 429 is kept on the error.

A connection that breaks after the answer's finish reason arrived loses only the usage chunk: the
answer is whole, so the stream ends normally (without usage) and the break is logged. Closing the
stream early (a consumer that stops reading) closes the response and gives the connection back.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator
from contextlib import aclosing
from email.utils import parsedate_to_datetime
from time import time

import httpx

from core.contracts.types import ChatRequest, Delta

from .chat_stream import chat_deltas
from .config import LlmConfig
from .errors import LLMError, LLMErrorReason, LLMUnavailableError, error_for_status
from .wire import error_detail, request_body

log = logging.getLogger("keel.llm")

ERROR_BODY_LIMIT = 8192


class OpenAICompatibleBackend:
    """Streams chat completions from one OpenAI-compatible server."""

    def __init__(self, config: LlmConfig, *, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.config = config
        headers = {"Accept": "text/event-stream"}
        if config.api_key:
            headers["Authorization"] = f"Bearer {config.api_key}"
        self._client = httpx.AsyncClient(
            base_url=config.base_url,
            headers=headers,
            timeout=httpx.Timeout(config.timeout, connect=config.connect_timeout),
            transport=transport,
        )
        self._url = httpx.URL(config.base_url)

    @property
    def server_address(self) -> str:
        return self._url.host

    @property
    def server_port(self) -> int | None:
        return self._url.port or (443 if self._url.scheme == "https" else 80)

    def describe(self) -> str:
        return (
            f"OpenAI-compatible server at {self.config.base_url}, default model {self.config.default_model!r}"
        )

    async def close(self) -> None:
        await self._client.aclose()

    async def ping(self) -> bool:
        """Whether the server answers at all (``GET models``): any answer below 500 means reachable,
        so a DEAD ``llm`` recovers once the server is back, with no chat call needed."""
        try:
            response = await self._client.get("models", headers={"Accept": "application/json"})
        except httpx.HTTPError as exc:
            raise _transport_error(exc) from exc
        return response.status_code < 500

    async def stream(self, request: ChatRequest) -> AsyncGenerator[Delta, None]:
        body = request_body(request, stream_usage=self.config.stream_usage)
        finished = False
        try:
            async with self._client.stream("POST", "/chat/completions", json=body) as response:
                if response.status_code >= 400:
                    raise await _status_error(response)
                deltas = chat_deltas(
                    response.aiter_lines(),
                    model=request.model,
                    provider=self.config.provider_name,
                    prices=self.config.prices,
                )
                async with aclosing(deltas) as answer:
                    async for delta in answer:
                        finished = finished or delta.finish_reason is not None
                        yield delta
        except httpx.HTTPError as exc:
            if finished:
                # The answer is whole; only the usage chunk (and [DONE]) were lost with the connection.
                log.warning("the model server's connection broke after the answer finished: %s", exc)
                return
            raise _transport_error(exc) from exc


async def _status_error(response: httpx.Response) -> LLMError:
    body = b""
    try:
        async for part in response.aiter_bytes():
            body += part
            if len(body) >= ERROR_BODY_LIMIT:
                break
    except httpx.HTTPError:
        pass  # the status alone still says what happened
    retry_after = _retry_after(response.headers.get("retry-after"))
    return error_for_status(
        response.status_code, error_detail(body[:ERROR_BODY_LIMIT]), retry_after=retry_after
    )


def _retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - time())
    except (TypeError, ValueError):
        return None


def _transport_error(exc: httpx.HTTPError) -> LLMError:
    if isinstance(exc, httpx.TimeoutException):
        what = "connecting to" if isinstance(exc, httpx.ConnectTimeout) else "waiting for"
        return LLMError(LLMErrorReason.TIMEOUT, f"timed out {what} the model server: {type(exc).__name__}")
    if isinstance(exc, httpx.ConnectError):
        return LLMUnavailableError(f"cannot reach the model server: {exc}")
    if isinstance(exc, httpx.TransportError):
        return LLMError(
            LLMErrorReason.CONNECTION,
            f"the connection to the model server broke: {exc or type(exc).__name__}",
        )
    return LLMError(LLMErrorReason.CONNECTION, f"the request to the model server failed: {exc}")

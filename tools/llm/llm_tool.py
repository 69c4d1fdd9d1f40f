"""The ``llm`` tool: Keel's ``LLMPort`` over an OpenAI-compatible chat-completions server.

Plugins call it exactly as the port says (``core.contracts.ports.LLMPort``)::

    async for delta in llm.stream(messages=[Message("user", "hi")], model="gpt-4o-mini"):
        ...                                   # text as it arrives; tool calls whole; usage last
    result = await llm.chat(messages=[...], model="")      # the collected stream ("" = LLM_MODEL)
    result = await llm.complete(system="Be brief.", user="hi", model="")

* ``stream()`` is the primitive; ``chat()`` is ``assemble_deltas`` over it and ``complete()`` is a
  chat of one optional system message and one user message. ``model=""`` means ``LLM_MODEL``;
  ``default_model`` says which model that is (agents are declared with it).
* Cost comes from the price table (:mod:`tools.llm.pricing`), usage from the stream's final chunk.
* Failures are :class:`~tools.llm.errors.LLMError` s, classified for ``retry()``; a failure after
  the first delta is an ``LLMStreamInterrupted`` (see :mod:`tools.llm.errors`). The tool itself
  never retries: that is a policy the caller chooses (``core.policies.retry``).
* Without ``LLM_BASE_URL`` the tool is OFF and every call raises ``LLMNotConfiguredError`` saying what
  to set. ``LLM_PROVIDER=echo`` selects the offline demo model (:mod:`tools.llm.echo_backend`); the
  system dump's message for the tool says so.
* GenAI spans and metrics (:mod:`tools.llm.genai_telemetry`) are recorded when telemetry is on.

Configuration: :mod:`tools.llm.config`.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from contextlib import aclosing
from typing import Any, Protocol

from core.base_tool import BaseTool
from core.contracts.ports import ChatFromStream
from core.contracts.types import ChatRequest, Delta, LLMResult, Message, Role, ToolSchema
from core.errors import ToolNotConfiguredError
from core.registry import ToolStatus

from .config import NOT_CONFIGURED, LlmConfig, Provider, load_config
from .echo_backend import EchoBackend
from .errors import LLMError, LLMNotConfiguredError, LLMStreamInterrupted
from .genai_telemetry import GenAiTelemetry
from .openai_backend import OpenAICompatibleBackend

log = logging.getLogger("keel.llm")


class Backend(Protocol):
    @property
    def server_address(self) -> str: ...
    @property
    def server_port(self) -> int | None: ...

    def describe(self) -> str: ...
    def stream(self, request: ChatRequest) -> AsyncGenerator[Delta, None]: ...
    async def close(self) -> None: ...
    async def ping(self) -> bool: ...


class LlmTool(ChatFromStream, BaseTool):
    """A chat model (OpenAI-compatible server, or the offline echo model): stream, chat, complete."""

    name = "llm"
    traces_own_calls = True  # its ``chat {model}`` span is the call's span; the proxy adds none

    def __init__(self) -> None:
        self._config: LlmConfig | None = None
        self._backend: Backend | None = None
        self._telemetry: GenAiTelemetry | None = None
        self._unready_reason = NOT_CONFIGURED

    # -- lifecycle ---------------------------------------------------------------------------------

    async def setup(self) -> None:
        try:
            config = load_config(self.project_root)
        except ValueError as exc:
            self._unready_reason = f"LLM misconfigured: {exc}"
            raise
        self._config = config
        backend: Backend
        if config.provider is Provider.ECHO:
            backend = EchoBackend(config)
        elif not config.base_url:
            raise ToolNotConfiguredError(NOT_CONFIGURED)
        else:
            backend = OpenAICompatibleBackend(config)
        self._backend = backend
        self._telemetry = GenAiTelemetry(config.provider_name, backend.server_address, backend.server_port)
        summary = backend.describe()
        if len(config.prices):
            summary += f"; {len(config.prices)} model price(s)"
        self.kernel_registry.update_tool_status(self.name, ToolStatus.OK, summary)
        log.info("llm ready: %s", summary)

    async def shutdown(self) -> None:
        backend, self._backend = self._backend, None
        if backend is not None:
            await backend.close()

    async def health_check(self) -> bool:
        """Whether the model server answers (polled by the system domain, so DEAD recovers alone)."""
        backend = self._backend
        return True if backend is None else await backend.ping()

    async def on_instrument(self, tracer_provider: Any, meter_provider: Any = None) -> None:
        """Record spans (and metrics, when a meter provider is given) through these providers."""
        if self._telemetry is not None:
            self._telemetry.use(tracer_provider, meter_provider)

    @property
    def provider_name(self) -> str:
        """``gen_ai.provider.name`` of the model's provider (``LLM_PROVIDER_NAME``), "" before setup."""
        return self._config.provider_name if self._config is not None else ""

    @property
    def default_model(self) -> str:
        """The model a call with ``model=""`` uses: ``LLM_MODEL``, ``echo`` for the echo provider."""
        return self._config.default_model if self._config is not None else ""

    def cost(self, model: str, input_tokens: int, output_tokens: int) -> float | None:
        """What ``input_tokens`` in and ``output_tokens`` out cost on ``model`` by ``LLM_PRICES``,
        or ``None`` when the table does not price it (used to price an estimate of a call the
        server reported no usage for)."""
        if self._config is None or self._config.prices.price_for(model or self.default_model) is None:
            return None
        return self._config.prices.cost(model or self.default_model, input_tokens, output_tokens)

    # -- LLMPort -----------------------------------------------------------------------------------

    async def stream(
        self,
        *,
        messages: Sequence[Message],
        model: str,
        tools: Sequence[ToolSchema] | None = None,
        response_format: Mapping[str, Any] | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        cache_hint: Any = None,
    ) -> AsyncIterator[Delta]:
        """The answer as it arrives: text deltas, then whole tool calls and the finish reason, then usage."""
        backend, telemetry = self._ready()
        request = ChatRequest(
            messages=messages,
            model=model or self.default_model,
            tools=tools,
            response_format=response_format,
            temperature=temperature,
            max_tokens=max_tokens,
            cache_hint=cache_hint,
        )
        delivered = 0
        try:
            async with aclosing(telemetry.observe(request, backend.stream(request))) as deltas:
                async for delta in deltas:
                    delivered += 1
                    yield delta
        except LLMError as exc:
            if delivered and not isinstance(exc, LLMStreamInterrupted):
                raise LLMStreamInterrupted(exc, delivered) from exc
            raise

    async def complete(
        self,
        *,
        system: str,
        user: str,
        model: str,
        response_format: Mapping[str, Any] | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
    ) -> LLMResult:
        """One question, one answer: a chat of the system prompt (when not empty) and the user text."""
        messages = [Message(Role.SYSTEM, system)] if system else []
        messages.append(Message(Role.USER, user))
        return await self.chat(
            messages=messages,
            model=model,
            response_format=response_format,
            temperature=temperature,
            max_tokens=max_tokens,
        )

    # -- internals ---------------------------------------------------------------------------------

    def _ready(self) -> tuple[Backend, GenAiTelemetry]:
        if self._backend is None or self._telemetry is None:
            raise LLMNotConfiguredError(self._unready_reason)
        return self._backend, self._telemetry

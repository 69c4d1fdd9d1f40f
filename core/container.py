"""The Container holds every tool behind a ToolProxy, the single way plugins reach a tool.

The proxy times every public method call, records it in the registry's ring buffer, feeds the
metrics sinks, wraps the call in a span when a span factory is registered, and keeps the tool's
health with the hybrid policy:

- a ``ToolUnavailableError`` (or subclass) marks the tool DEAD at once: the tool said its
  infrastructure is gone;
- a caller's mistake never counts: arguments that do not bind to the method's signature (the
  ``TypeError`` is re-raised naming the caller's line, with "did you mean" for a misspelt keyword),
  and a ``KeelError`` that says the input was bad, not found or a conflict (see
  :func:`core.errors.is_caller_error`);
- any other ``Exception`` only counts; ``DEAD_STREAK`` consecutive ones mark it DEAD, so business
  errors that slip through never kill a healthy tool on their own;
- any success resets the streak, and a success while DEAD marks it OK with "Recovered";
- ``BaseException``s that are not ``Exception`` (task cancellation, a generator closed by its
  consumer, a test double running out) are control flow, never a tool failure.

The proxy never retries: a blind retry of a non-idempotent call (a payment) is worse than the error.

An unknown method is an ``AttributeError`` that lists the tool's methods and the closest names.

Wrappers are built once per method and cached on the proxy instance, so after the first access a
call costs a dictionary hit plus the bookkeeping above. Sync methods stay sync, coroutine functions
stay coroutine functions, async generator functions stay async generators (timed until exhausted
or closed). Anything that is not a bound method (a FastAPI app, a class, a constant) is returned
as itself, unwrapped.
"""

from __future__ import annotations

import difflib
import inspect
import os
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractContextManager
from time import perf_counter, time
from typing import Any

from core.base_tool import BaseTool
from core.errors import ToolNotFoundError, ToolUnavailableError, is_caller_error
from core.registry import Registry, ToolState, ToolStatus, record_dict

DEAD_STREAK = 5

SpanFactory = Callable[[str, str], AbstractContextManager[Any]]


class _ToolHealth:
    """The mutable health bookkeeping one proxy shares with all its method wrappers."""

    __slots__ = ("name", "registry", "state", "streak")

    def __init__(self, name: str, registry: Registry, state: ToolState) -> None:
        self.name = name
        self.registry = registry
        self.state = state
        self.streak = 0

    def succeeded(self) -> None:
        self.streak = 0
        if self.state.status is ToolStatus.DEAD and not self.state.setup_failed:
            self.registry.update_tool_status(self.name, ToolStatus.OK, "Recovered")

    def failed(self, exc: Exception) -> None:
        if self.state.status is ToolStatus.OFF:
            return  # an unconfigured tool stays OFF, however often it is called
        if is_caller_error(exc):
            return  # the caller's mistake: neither a failure of the tool nor a success
        if isinstance(exc, ToolUnavailableError):
            self.streak = DEAD_STREAK
            self.registry.update_tool_status(self.name, ToolStatus.DEAD, f"{type(exc).__name__}: {exc}")
            return
        self.streak += 1
        if self.streak >= DEAD_STREAK and self.state.status is not ToolStatus.DEAD:
            self.registry.update_tool_status(
                self.name,
                ToolStatus.DEAD,
                f"{self.streak} consecutive failures; last: {type(exc).__name__}: {exc}",
            )


class ToolProxy:
    """Stands in for one tool; see the module docstring for what every call gets."""

    def __init__(self, tool: BaseTool, name: str, container: Container, health: _ToolHealth) -> None:
        self._keel_tool = tool
        self._keel_name = name
        self._keel_container = container
        self._keel_health = health

    def __getattr__(self, attr: str) -> Any:
        # Only reached on a cache miss: wrappers are stored in the instance dict below.
        try:
            value = getattr(self._keel_tool, attr)
        except AttributeError:
            if attr.startswith("_"):
                raise
            raise UnknownMethodError(self._keel_name, attr, self._keel_tool) from None
        if attr.startswith("_") or not inspect.ismethod(value):
            return value
        wrapper = _wrap(self._keel_name, self._keel_container, self._keel_health, attr, value)
        self.__dict__[attr] = wrapper
        return wrapper

    def __repr__(self) -> str:
        return f"<ToolProxy {self._keel_name}: {self._keel_tool!r}>"


def _wrap(  # noqa: C901  the hot path is inlined on purpose (see the docstring)
    tool_name: str, container: Container, health: _ToolHealth, method: str, fn: Callable[..., Any]
) -> Callable[..., Any]:
    """Build the wrapper for one method. The untraced success path is inlined on purpose: it runs
    on every tool call in the service, and each extra Python frame there costs about 50 ns."""
    registry = health.registry
    append = registry.metrics.append
    sinks = registry.metrics_sinks
    state = health.state
    dead = ToolStatus.DEAD

    def finished(started: float, success: bool) -> None:
        record = (tool_name, method, (perf_counter() - started) * 1000.0, success, time())
        append(record)
        if sinks:
            registry.emit_to_sinks(record_dict(record))

    def ok(started: float) -> None:
        finished(started, True)
        if health.streak or state.status is dead:
            health.succeeded()

    def failed(
        started: float, exc: Exception, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Exception | None:
        """Record a failed call; return the error to raise instead when the arguments did not bind."""
        finished(started, False)
        if isinstance(exc, TypeError) and (
            unbound := _binding_error(tool_name, method, fn, exc, args, kwargs)
        ):
            return unbound
        health.failed(exc)
        return None

    if inspect.isasyncgenfunction(fn):

        async def stream_call(*args: Any, **kwargs: Any) -> AsyncIterator[Any]:
            factory = container.span_factory
            span = factory(tool_name, method) if factory is not None else None
            if span is not None:
                span.__enter__()
            started = perf_counter()
            try:
                agen = fn(*args, **kwargs)
            except TypeError as exc:
                if span is not None:
                    span.__exit__(type(exc), exc, exc.__traceback__)
                if (replacement := failed(started, exc, args, kwargs)) is not None:
                    raise replacement from None
                raise
            exc_info: tuple[Any, Any, Any] = (None, None, None)
            try:
                async for item in agen:
                    yield item
            except Exception as exc:
                exc_info = (type(exc), exc, exc.__traceback__)
                if (replacement := failed(started, exc, args, kwargs)) is not None:
                    raise replacement from None
                raise
            except GeneratorExit:
                ok(started)  # the consumer stopped early: not a failure of the tool
                raise
            except BaseException as exc:
                exc_info = (type(exc), exc, exc.__traceback__)
                raise
            else:
                ok(started)
            finally:
                await agen.aclose()
                if span is not None:
                    span.__exit__(*exc_info)

        return stream_call

    if inspect.iscoroutinefunction(fn):

        async def traced_async(args: tuple[Any, ...], kwargs: dict[str, Any], factory: SpanFactory) -> Any:
            with factory(tool_name, method):
                started = perf_counter()
                try:
                    result = await fn(*args, **kwargs)
                except Exception as exc:
                    if (replacement := failed(started, exc, args, kwargs)) is not None:
                        raise replacement from None
                    raise
                ok(started)
                return result

        async def async_call(*args: Any, **kwargs: Any) -> Any:
            factory = container.span_factory
            if factory is not None:
                return await traced_async(args, kwargs, factory)
            started = perf_counter()
            try:
                result = await fn(*args, **kwargs)
            except Exception as exc:
                if (replacement := failed(started, exc, args, kwargs)) is not None:
                    raise replacement from None
                raise
            record = (tool_name, method, (perf_counter() - started) * 1000.0, True, time())
            append(record)
            if sinks:
                registry.emit_to_sinks(record_dict(record))
            if health.streak or state.status is dead:
                health.succeeded()
            return result

        return async_call

    def traced_sync(args: tuple[Any, ...], kwargs: dict[str, Any], factory: SpanFactory) -> Any:
        with factory(tool_name, method):
            started = perf_counter()
            try:
                result = fn(*args, **kwargs)
            except Exception as exc:
                if (replacement := failed(started, exc, args, kwargs)) is not None:
                    raise replacement from None
                raise
            ok(started)
            return result

    def sync_call(*args: Any, **kwargs: Any) -> Any:
        factory = container.span_factory
        if factory is not None:
            return traced_sync(args, kwargs, factory)
        started = perf_counter()
        try:
            result = fn(*args, **kwargs)
        except Exception as exc:
            if (replacement := failed(started, exc, args, kwargs)) is not None:
                raise replacement from None
            raise
        record = (tool_name, method, (perf_counter() - started) * 1000.0, True, time())
        append(record)
        if sinks:
            registry.emit_to_sinks(record_dict(record))
        if health.streak or state.status is dead:
            health.succeeded()
        return result

    return sync_call


class UnknownMethodError(AttributeError):
    """A plugin asked a tool for a method it does not have; the message lists what it has."""

    def __init__(self, tool_name: str, attr: str, tool: Any) -> None:
        super().__init__(attr)
        self.tool_name = tool_name
        self.attr = attr
        self._tool = tool
        self.where = _caller_location()

    def __str__(self) -> str:  # built when shown: ``getattr(proxy, name, None)`` probes stay cheap
        methods = [
            n for n in dir(self._tool) if not n.startswith("_") and callable(getattr(self._tool, n, None))
        ]
        hint = _did_you_mean(self.attr, methods)
        where = f" (at {self.where})" if self.where else ""
        return (
            f"tool {self.tool_name!r} has no method {self.attr!r}{where}{hint}; it has: {', '.join(methods)}"
        )


def _did_you_mean(name: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(name, choices, n=3, cutoff=0.6)
    return f": did you mean {' or '.join(repr(c) for c in close)}?" if close else ""


_CORE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _caller_location() -> str | None:
    """``file:line`` of the first frame outside ``core/``: the plugin (or tool) line that made the call."""
    frame = sys._getframe(1)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not filename.startswith(_CORE_DIR) and not filename.startswith("<"):
            return f"{_short(filename)}:{frame.f_lineno}"
        frame = frame.f_back  # type: ignore[assignment]
    return None


def _short(filename: str) -> str:
    cwd = os.getcwd() + os.sep
    return filename[len(cwd) :] if filename.startswith(cwd) else filename


def _binding_error(
    tool_name: str,
    method: str,
    fn: Callable[..., Any],
    exc: TypeError,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> TypeError | None:
    """A ``TypeError`` naming the caller's line when ``args``/``kwargs`` do not bind to ``fn``; else None."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    try:
        signature.bind(*args, **kwargs)
    except TypeError as unbound:
        names = [
            p.name for p in signature.parameters.values() if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        ]
        hints = [
            f"{key!r}{hint}"
            for key in kwargs
            if key not in signature.parameters and (hint := _did_you_mean(key, names))
        ]
        plain = signature.replace(
            parameters=[p.replace(annotation=p.empty) for p in signature.parameters.values()],
            return_annotation=signature.empty,
        )
        where = _caller_location()
        message = f"{tool_name}.{method}{plain}: {unbound}"
        if where:
            message += f" (called at {where})"
        if hints:
            message += "".join(f"; {hint}" for hint in hints)
        return ToolCallError(message)
    return None


class ToolCallError(TypeError):
    """A tool method was called with arguments that do not fit its signature (the caller's mistake)."""


class Container:
    """All tools by name, each behind its proxy; ``get_raw_tools()`` bypasses the proxies."""

    def __init__(self, registry: Registry) -> None:
        self.registry = registry
        self.span_factory: SpanFactory | None = None
        self._tools: dict[str, BaseTool] = {}
        self._proxies: dict[str, ToolProxy] = {}

    def add(self, tool: BaseTool) -> ToolProxy:
        name = tool.name
        state = self.registry.tool_state(name)
        proxy = ToolProxy(tool, name, self, _ToolHealth(name, self.registry, state))
        self._tools[name] = tool
        self._proxies[name] = proxy
        return proxy

    def get(self, name: str) -> Any:
        """The proxy of the tool called ``name`` (typed ``Any``: it stands in for the tool)."""
        try:
            return self._proxies[name]
        except KeyError:
            raise ToolNotFoundError(f"no tool named {name!r}; known: {sorted(self._proxies)}") from None

    def has(self, name: str) -> bool:
        return name in self._proxies

    def names(self) -> list[str]:
        return list(self._proxies)

    def get_raw_tools(self) -> dict[str, BaseTool]:
        """The tool instances themselves, bypassing the proxy (for instrumentation and introspection)."""
        return dict(self._tools)

    def register_span_factory(self, factory: SpanFactory | None) -> None:
        """From now on every proxied call runs inside ``factory(tool, method)``."""
        self.span_factory = factory

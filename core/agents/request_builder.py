"""``RequestBuilder``: a versioned prompt, grounding and a seeded transcript, assembled into a request.

``RequestBuilder(prompt, model=...)`` renders ``prompt`` (a ``Prompt``: id, version, template,
default inputs) as the system message, asks the ``grounder`` (when given) for the text grounding the
task and adds it as a second system message, then the ``context`` messages (a ``WorkingContext`` or
a sequence of ``Message`` s), then the task as the user message. ``await builder.build(ctx, task,
**inputs)`` returns the ``ChatRequest``.

The build runs in a ``("build_request", "internal")`` span on ``ctx.trace`` stamped with
``keel.prompt.id`` and ``keel.prompt.version``, so a trace tells which prompt version produced a
call. The template is rendered with ``str.format`` over the prompt's inputs updated by ``inputs``; a
placeholder with no value is a ``ValueError`` naming it (a prompt silently sent with ``{name}`` in it
is the bug this refuses). A builder with no ``invoker`` anywhere near it is fine: it never calls a
model, so it can be tested with ``make_test_ctx()`` alone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from core.agents.capabilities import Grounder
from core.contracts.types import ChatRequest, Message, Prompt, Role, ToolSchema

__all__ = ["RequestBuilder", "render_prompt"]


class _Strict(dict[str, Any]):
    def __missing__(self, key: str) -> Any:
        raise ValueError(f"the prompt has a placeholder {{{key}}} with no value; pass {key}=...")


def render_prompt(prompt: Prompt, inputs: Mapping[str, Any] | None = None) -> str:
    """``prompt.template`` with its inputs (updated by ``inputs``) filled in."""
    values = _Strict(prompt.inputs)
    values.update(inputs or {})
    return prompt.template.format_map(values)


class RequestBuilder:
    """Builds the ``ChatRequest`` for a task from a versioned prompt, grounding and context."""

    def __init__(
        self,
        prompt: Prompt,
        *,
        model: str,
        grounder: Grounder | None = None,
        tools: Sequence[ToolSchema] | None = None,
        response_format: Mapping[str, Any] | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
    ) -> None:
        if not model:
            raise ValueError("a RequestBuilder needs a model")
        self.prompt = prompt
        self.model = model
        self.grounder = grounder
        self.tools = tools
        self.response_format = response_format
        self.temperature = temperature
        self.max_tokens = max_tokens

    async def build(self, ctx: Any, task: str, *, context: Any = None, **inputs: Any) -> ChatRequest:
        attrs = {"keel.prompt.id": self.prompt.id, "keel.prompt.version": self.prompt.version}
        with ctx.trace.span("build_request", "internal", attrs) as span:
            span.set_attribute("keel.prompt.id", self.prompt.id)
            span.set_attribute("keel.prompt.version", self.prompt.version)
            messages = [Message(Role.SYSTEM, render_prompt(self.prompt, inputs))]
            if self.grounder is not None:
                grounding = await self.grounder(ctx, task)
                if grounding:
                    messages.append(Message(Role.SYSTEM, grounding, name="grounding"))
            if context is not None:
                messages.extend(getattr(context, "messages", context))
            messages.append(Message(Role.USER, task))
            return ChatRequest(
                messages=messages,
                model=self.model,
                tools=self.tools,
                response_format=self.response_format,
                temperature=self.temperature,
                max_tokens=self.max_tokens,
            )

"""Reassemble whole tool calls from the fragments a chat-completions stream sends.

A server streams each tool call in pieces: the first fragment usually carries ``index``, ``id`` and
the function ``name``, later ones more of the ``arguments`` JSON text under the same ``index``.
Servers differ in ways that matter here, and the rules below cover the ones seen in practice:

* Fragments are matched to a call by ``id`` when the id is one already seen.
* Otherwise by ``index``. A fragment carrying a *new* id and a function *name* at an index already
  in use opens a new call: some servers number every call of a parallel batch ``0`` and tell them
  apart only by id. A new id *without* a name continues the call at that index: other servers send a
  fresh id on later fragments of the same call. The first id a call was given is the one it keeps.
* A fragment with neither index nor a known id continues the most recent call.
* A call whose id never arrived is given ``call_<n>`` (its position); a call that never got a name,
  or whose arguments are not a JSON object (empty text counts as ``{}``), is refused with
  :class:`~tools.llm.errors.LLMError` (``malformed_response``): passing on a half-understood call
  would run a tool with arguments the model did not send.

Argument text is collected in parts and joined once, so a long argument costs linear time.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from core.contracts.types import ToolCall

from .errors import LLMError, LLMErrorReason


class _Slot:
    __slots__ = ("id", "name", "parts")

    def __init__(self, call_id: str | None, name: str | None) -> None:
        self.id = call_id
        self.name = name
        self.parts: list[str] = []


class ToolCallAssembler:
    """Collects fragments (``add``) and hands back the finished calls (``finish``)."""

    def __init__(self) -> None:
        self._slots: list[_Slot] = []
        self._by_index: dict[int, _Slot] = {}
        self._by_id: dict[str, _Slot] = {}

    def __bool__(self) -> bool:
        return bool(self._slots)

    def add(self, fragment: Mapping[str, Any]) -> None:
        """Take one entry of a delta's ``tool_calls`` list."""
        if not isinstance(fragment, Mapping):
            raise _malformed(f"a tool call fragment must be an object, got {fragment!r}")
        index = fragment.get("index")
        if not isinstance(index, int) or isinstance(index, bool):
            index = None
        call_id = fragment.get("id") or None
        if call_id is not None and not isinstance(call_id, str):
            raise _malformed(f"a tool call id must be a string, got {call_id!r}")
        function = fragment.get("function") or {}
        if not isinstance(function, Mapping):
            raise _malformed(f"a tool call's function must be an object, got {function!r}")
        name = function.get("name") or None
        arguments = function.get("arguments") or ""
        if not isinstance(arguments, str):
            # A few servers send the arguments already decoded; keep them as their JSON text.
            arguments = json.dumps(arguments)

        slot = self._find(index, call_id, name)
        if slot is None:
            slot = _Slot(call_id, name)
            self._slots.append(slot)
        else:
            if slot.id is None and call_id is not None:
                slot.id = call_id
            if slot.name is None and name is not None:
                slot.name = name
        if index is not None:
            self._by_index[index] = slot
        if call_id is not None:
            self._by_id.setdefault(call_id, slot)
        if arguments:
            slot.parts.append(arguments)

    def _find(self, index: int | None, call_id: str | None, name: str | None) -> _Slot | None:
        if call_id is not None and call_id in self._by_id:
            return self._by_id[call_id]
        if index is not None:
            current = self._by_index.get(index)
            if current is None:
                return None
            opens_new_call = call_id is not None and current.id is not None and name is not None
            return None if opens_new_call else current
        if call_id is None and self._slots:
            return self._slots[-1]
        return None

    def finish(self) -> tuple[ToolCall, ...]:
        """Every call collected so far, in the order they began; the assembler is then empty."""
        calls = tuple(_finished(position, slot) for position, slot in enumerate(self._slots))
        self._slots, self._by_index, self._by_id = [], {}, {}
        return calls


def _finished(position: int, slot: _Slot) -> ToolCall:
    if not slot.name:
        raise _malformed(f"tool call #{position + 1} ({slot.id or 'no id'}) never named its function")
    text = "".join(slot.parts).strip()
    try:
        arguments = json.loads(text) if text else {}
    except json.JSONDecodeError as exc:
        raise _malformed(
            f"the arguments of tool call {slot.name!r} are not valid JSON ({exc.msg}): {_clip(text)}"
        ) from None
    if not isinstance(arguments, dict):
        raise _malformed(f"the arguments of tool call {slot.name!r} must be a JSON object: {_clip(text)}")
    return ToolCall(slot.id or f"call_{position}", slot.name, arguments)


def _malformed(message: str) -> LLMError:
    return LLMError(LLMErrorReason.MALFORMED_RESPONSE, message)


def _clip(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[:limit] + "..."

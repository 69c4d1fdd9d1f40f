"""Read the JSON object a model is part-way through writing.

``partial_object(text)`` returns the fields of the JSON object that ``text`` begins (after any
leading prose or a code fence), as far as it has arrived, or ``None`` when no object has started.
The rules, chosen so a streaming consumer sees fields appear and grow but never sees a wrong one:

* an unterminated string value is included as far as it goes (a title renders while it streams);
* a key whose value has not started, a half-written literal (``tru``) or a dangling escape is
  dropped, back to the last complete member;
* open arrays and objects are closed, so nested values appear with what they hold so far;
* numbers are taken as written so far (``12`` may still become ``123``).

``strict_json(text)`` is the end-of-stream counterpart: the complete document, read from the text
itself or from inside a Markdown code fence; it raises ``ValueError`` when there is none.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["partial_object", "strict_json"]

_CLOSERS = {"{": "}", "[": "]"}
_FENCE = re.compile(r"```(?:json)?\s*(.*?)(?:```|$)", re.DOTALL)


def strict_json(text: str) -> Any:
    """The JSON document in ``text`` (bare, or inside a code fence)."""
    stripped = text.strip()
    try:
        return json.loads(stripped)
    except json.JSONDecodeError as bare_error:
        match = _FENCE.search(stripped)
        if match is None:
            raise ValueError(f"not valid JSON: {bare_error}") from None
        try:
            return json.loads(match.group(1).strip())
        except json.JSONDecodeError as fenced_error:
            raise ValueError(f"not valid JSON: {fenced_error}") from None


def partial_object(text: str) -> dict[str, Any] | None:  # noqa: C901  one scanner over a JSON prefix; its states are one loop
    """The fields of the JSON object ``text`` has begun, as far as they have arrived."""
    start = text.find("{")
    if start < 0:
        return None
    body = text[start:]
    stack: list[str] = []
    in_string = False
    escaped = False
    # Places the text can be cut so that closing what is open yields a valid document: just after
    # an opening bracket, and just before a comma (after the member it ends).
    cuts: list[tuple[int, str]] = []
    for index, char in enumerate(body):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
            continue
        if char == '"':
            in_string = True
        elif char in _CLOSERS:
            stack.append(_CLOSERS[char])
            cuts.append((index + 1, "".join(reversed(stack))))
        elif char in "}]":
            if not stack:
                break
            stack.pop()
            if not stack:
                body = body[: index + 1]
                break
        elif char == ",":
            cuts.append((index, "".join(reversed(stack))))
    closers = "".join(reversed(stack))
    attempts: list[str] = []
    if in_string and not escaped:
        attempts.append(body + '"' + closers)
    if not in_string:
        attempts.append(body + closers)
    attempts.extend(body[:cut] + suffix for cut, suffix in reversed(cuts[-3:]))
    for attempt in attempts:
        try:
            value = json.loads(attempt)
        except json.JSONDecodeError:
            continue
        return value if isinstance(value, dict) else None
    return None

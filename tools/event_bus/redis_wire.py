"""How events, replies and dead letters are laid out in Redis: key names and stream entry fields.

Keys, all under the prefix ``P`` (``EVENT_BUS_PREFIX``):

- ``P stream:<event name>`` — one stream per event name; each subscriber group is a consumer group
  on the streams of the names it subscribes to;
- ``P dead`` — the dead-letter stream, one entry per event a group gave up on;
- ``P inbox:<consumer>`` — the replies to the requests one process made.

An event entry carries everything a subscriber in another process needs to see the same
:class:`~tools.event_bus.events.Event` a local one would: ``id`` (the bus's own event id, so causal
``parent_id`` links hold across processes), ``name``, ``payload`` (compact JSON), ``ts`` (publish
time), ``parent`` and ``emitter``; ``process`` (``host:pid`` of the publisher) and ``reply_to`` (the
requester's inbox, for a request) travel alongside.

They travel packed in one field, ``e``: the JSON array ``[id, name, ts, process, parent, emitter,
reply_to, payload]`` (``null`` where a value is ``None``, so an empty parent id and no parent id
cannot be confused). One field rather than one per value because the client's cost per entry —
encoding each argument of ``XADD``, parsing each element of an ``XREADGROUP`` reply — grows with the
number of fields, and on a busy bus that cost is most of the bus's. The entry with one field per
value (``None`` ones left out) is still read, and is what a dead letter keeps and a replay writes;
fields written beside ``e`` (a replay's ``only_group``, or any field an operator adds) override the
packed values, so readers that look at single fields work on both layouts through
:func:`unpacked`.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Mapping
from enum import StrEnum
from typing import Any, NamedTuple

from .events import Event
from .payload import freeze_json, to_json

_HOST = socket.gethostname()
_label = ""


def process_label() -> str:
    """``host:pid`` of this process, as entries and dead letters name it.

    Every entry carries it, so it is built once per process (a fork builds its own)."""
    global _label
    if not _label:
        _label = f"{_HOST}:{os.getpid()}"
    return _label


def _forget_label() -> None:
    global _label
    _label = ""


os.register_at_fork(after_in_child=_forget_label)


class Keys:
    """The key names under one prefix."""

    __slots__ = ("dead", "prefix", "stream_prefix")

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.stream_prefix = f"{prefix}stream:"
        self.dead = f"{prefix}dead"

    def stream(self, name: str) -> str:
        return self.stream_prefix + name

    def name_of(self, stream: str) -> str:
        return stream[len(self.stream_prefix) :]

    def inbox(self, consumer: str) -> str:
        return f"{self.prefix}inbox:{consumer}"

    def seen(self, group: str, event_id: str) -> str:
        """The de-duplication mark of ``event_id`` for ``group`` (expires after the TTL)."""
        return f"{self.prefix}seen:{group}:{event_id}"


PACKED = "e"
"""The field an event entry packs its values in (see the module docstring)."""
_PACKED_KEYS = ("id", "name", "ts", "process", "parent", "emitter", "reply_to", "payload")


def event_fields(event: Event, *, reply_to: str | None = None) -> dict[str, str]:
    """The stream entry of ``event`` (its payload already checked and frozen by the bus)."""
    packed = [event.id, event.name, event.timestamp, process_label(), event.parent_id, event.emitter]
    packed += (reply_to, event.payload)
    return {PACKED: to_json(packed)}


def unpacked(fields: Mapping[str, str]) -> Mapping[str, str]:
    """The entry with one field per value, whichever layout it was written in (the packed values
    first, then any field written beside them); ``fields`` itself when it is not packed or cannot
    be unpacked (then reading it as an event fails as it would have)."""
    text = fields.get(PACKED)
    if text is None:
        return fields
    try:
        values = json.loads(text)
        if type(values) is not list or len(values) != len(_PACKED_KEYS):
            return fields
        values[2] = repr(float(values[2]))
        values[7] = to_json(values[7])
    except (TypeError, ValueError):
        return fields
    classic = {key: value for key, value in zip(_PACKED_KEYS, values, strict=True) if value is not None}
    classic.update((key, value) for key, value in fields.items() if key != PACKED)
    return classic


_new_event = tuple.__new__  # a named tuple without its generated __new__'s argument handling


class Received(NamedTuple):
    event: Event
    reply_to: str | None
    process: str | None


def read_event(fields: Mapping[str, str]) -> Received:
    """The event an entry carries; ``ValueError`` for an entry no Keel bus wrote."""
    if len(fields) == 1 and PACKED in fields:  # what this bus writes: decoded once, nothing re-encoded
        try:
            id_, name, ts, process, parent, emitter, reply_to, payload = json.loads(fields[PACKED])
            if type(id_) is not str or type(name) is not str:
                raise TypeError("the id and the name are strings")
            event = _new_event(Event, (id_, name, freeze_json(payload), parent, emitter, float(ts)))
        except (TypeError, ValueError) as exc:
            raise ValueError(f"not an event entry ({type(exc).__name__}: {exc})") from None
        return _new_event(Received, (event, reply_to, process))
    fields = unpacked(fields)
    try:
        payload = freeze_json(json.loads(fields["payload"]))
        event = Event(
            fields["id"],
            fields["name"],
            payload,
            fields.get("parent"),
            fields.get("emitter"),
            float(fields["ts"]),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"not an event entry ({type(exc).__name__}: {exc})") from None
    return Received(event, fields.get("reply_to"), fields.get("process"))


# -- replies -----------------------------------------------------------------------------------


class ReplyKind(StrEnum):
    """What a group's reply to a request says; the member's value is the entry's field name."""

    ANSWER = "answer"  # the JSON text of the first value a subscriber returned
    NONE = "none"  # the group finished (or gave up) without an answer; the value says why
    ERROR = "error"  # the answer was not a JSON value


def reply_fields(request_id: str, group: str, kind: ReplyKind, value: str) -> dict[str, str]:
    return {"request": request_id, "group": group, str(kind): value}


# -- dead letters ------------------------------------------------------------------------------


def dead_letter_fields(
    fields: Mapping[str, str],
    *,
    stream_id: str,
    group: str,
    failures: Mapping[str, str],
    attempts: int,
    failed_at: float,
    consumer: str,
) -> dict[str, str]:
    """The original entry plus what went wrong: error, failures per subscriber, attempts, group."""
    error = "; ".join(f"{who}: {what}" for who, what in failures.items())
    letter = {key: value for key, value in unpacked(fields).items() if key != "reply_to"}
    letter.update(
        {
            "stream_id": stream_id,
            "group": group,
            "error": error,
            "failures": json.dumps(dict(failures), separators=(",", ":")),
            "attempts": str(attempts),
            "failed_at": repr(failed_at),
            "consumer": consumer,
        }
    )
    return letter


LETTER_ONLY_FIELDS = frozenset(
    {"stream_id", "group", "error", "failures", "attempts", "failed_at", "consumer"}
)


def replayed_fields(letter: Mapping[str, str]) -> dict[str, str]:
    """The stream entry that replays a dead letter: the original event, for its group only."""
    fields = {key: value for key, value in letter.items() if key not in LETTER_ONLY_FIELDS}
    fields["only_group"] = letter.get("group", "")
    fields["replayed_from"] = letter.get("stream_id", "")
    return fields


def stream_id_key(entry_id: str) -> tuple[int, int]:
    """``"ms-seq"`` as a tuple that orders like the stream does."""
    ms, _, seq = entry_id.partition("-")
    return int(ms), int(seq or 0)


def dead_letter_view(entry_id: str, fields: Mapping[str, str]) -> dict[str, Any]:
    """A dead letter as ``dead_letters()`` returns it: typed values, the payload decoded."""
    view: dict[str, Any] = dict(fields)
    view["dead_letter_id"] = entry_id
    for key, convert in (("attempts", int), ("failed_at", float), ("ts", float)):
        if key in view:
            try:
                view[key] = convert(view[key])
            except ValueError:
                pass
    for key in ("payload", "failures"):
        if key in view:
            try:
                view[key] = json.loads(view[key])
            except ValueError:
                pass
    return view

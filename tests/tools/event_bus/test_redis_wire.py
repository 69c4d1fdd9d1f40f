"""Stream entries: an event read back from its entry is the event a local subscriber would get."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tools.event_bus.events import Event
from tools.event_bus.payload import freeze_json
from tools.event_bus.redis_settings import RedisBusSettings
from tools.event_bus.redis_wire import (
    Keys,
    dead_letter_fields,
    dead_letter_view,
    event_fields,
    process_label,
    read_event,
    replayed_fields,
    unpacked,
)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@given(
    payload=json_values,
    parent=st.none() | st.text(),
    emitter=st.none() | st.text(),
    timestamp=st.floats(min_value=0, max_value=4e9),
)
def test_an_event_survives_its_entry(
    payload: Any, parent: str | None, emitter: str | None, timestamp: float
) -> None:
    event = Event("ab12-7", "order.paid", freeze_json(payload), parent, emitter, timestamp)
    fields = event_fields(event, reply_to="keel:events:inbox:x")
    assert all(isinstance(value, str) for value in fields.values())
    received = read_event(fields)
    assert received.event == event
    assert received.reply_to == "keel:events:inbox:x"
    assert received.process == process_label()


def test_an_empty_parent_id_is_not_a_missing_one() -> None:
    event = Event("ab12-8", "x", None, "", None, 1.0)
    assert read_event(event_fields(event)).event.parent_id == ""
    assert read_event(event_fields(event._replace(parent_id=None))).event.parent_id is None


def test_an_entry_no_bus_wrote_is_refused() -> None:
    with pytest.raises(ValueError, match="not an event entry"):
        read_event({"name": "x", "payload": "{"})


def test_an_entry_packs_the_event_in_one_field() -> None:
    """One field, so a reader's client parses two strings per entry rather than two per value."""
    event = Event("ab12-10", "order.paid", freeze_json({"order": 1}), None, "shop.Orders.pay", 2.5)
    assert list(event_fields(event)) == ["e"]


def test_an_entry_with_one_field_per_value_is_still_read() -> None:
    """What a bus before the packed layout wrote, and what a replayed dead letter is."""
    event = Event("ab12-11", "order.paid", freeze_json({"order": 1}), "req-1", None, 3.0)
    classic = dict(unpacked(event_fields(event, reply_to="inbox")))
    assert classic == {
        "id": "ab12-11",
        "name": "order.paid",
        "ts": "3.0",
        "process": process_label(),
        "parent": "req-1",
        "reply_to": "inbox",
        "payload": '{"order":1}',
    }
    assert read_event(classic) == (event, "inbox", process_label())


def test_fields_beside_the_packed_ones_override_them() -> None:
    event = Event("ab12-12", "order.paid", freeze_json({"order": 1}), None, None, 4.0)
    edited = {**event_fields(event), "id": "ab12-12-fresh", "only_group": "billing"}
    assert read_event(edited).event == event._replace(id="ab12-12-fresh")
    assert unpacked(edited)["only_group"] == "billing"


def test_a_replayed_dead_letter_is_the_original_event() -> None:
    event = Event("ab12-13", "order.paid", freeze_json({"order": 1}), "req-1", "shop.Orders.pay", 5.0)
    letter = dead_letter_fields(
        event_fields(event),
        stream_id="1-0",
        group="billing",
        failures={"billing.Charge.on_paid": "RuntimeError: declined"},
        attempts=3,
        failed_at=6.0,
        consumer="h:1:ab",
    )
    replay = replayed_fields(letter)
    assert read_event(replay).event == event
    assert (replay["only_group"], replay["replayed_from"]) == ("billing", "1-0")


def test_keys_live_under_the_prefix_without_colliding_with_event_names() -> None:
    keys = Keys("app:")
    assert keys.stream("dead") == "app:stream:dead" != keys.dead == "app:dead"
    assert keys.name_of(keys.stream("order.paid")) == "order.paid"
    assert keys.inbox("host:1:ab") == "app:inbox:host:1:ab"


def test_a_dead_letter_keeps_the_event_and_says_what_went_wrong() -> None:
    event = Event("ab12-9", "order.paid", freeze_json({"order": 1}), "req-1", "shop.Orders.pay", 5.0)
    letter = dead_letter_fields(
        event_fields(event, reply_to="inbox"),
        stream_id="1-0",
        group="billing",
        failures={"billing.Charge.on_paid": "RuntimeError: declined"},
        attempts=3,
        failed_at=6.0,
        consumer="h:1:ab",
    )
    assert "reply_to" not in letter
    view = dead_letter_view("2-0", letter)
    assert view["payload"] == {"order": 1}
    assert view["attempts"] == 3
    assert view["error"] == "billing.Charge.on_paid: RuntimeError: declined"
    assert view["failures"] == {"billing.Charge.on_paid": "RuntimeError: declined"}
    assert (view["id"], view["parent"], view["stream_id"], view["dead_letter_id"]) == (
        "ab12-9",
        "req-1",
        "1-0",
        "2-0",
    )
    assert json.loads(letter["failures"]) == view["failures"]


def test_retry_backoff_doubles_up_to_a_ceiling() -> None:
    settings = RedisBusSettings(url="redis://x", retry_backoff_ms=200)
    assert [settings.backoff_seconds(n) for n in (1, 2, 3)] == [0.2, 0.4, 0.8]
    assert settings.backoff_seconds(30) == 10.0


def test_a_forked_child_labels_itself_with_its_own_pid() -> None:
    parent = process_label()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report its label and leave at once
        os.write(write, process_label().encode())
        os._exit(0)
    os.close(write)
    child = os.read(read, 200).decode()
    os.close(read)
    os.waitpid(pid, 0)
    assert parent.endswith(f":{os.getpid()}")
    assert child.endswith(f":{pid}") and child != parent

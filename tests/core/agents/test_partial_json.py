"""Reading the JSON object a model is part-way through writing, and the complete one at the end."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.agents._partial_json import partial_object, strict_json


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", None),
        ("Sure, here it is:", None),
        ("{", {}),
        ('{"title": "Oct', {"title": "Oct"}),
        ('{"title": "Octopus", "bo', {"title": "Octopus"}),
        ('{"title": "Octopus", "body":', {"title": "Octopus"}),
        ('{"title": "Octopus", "body": "', {"title": "Octopus", "body": ""}),
        ('{"a": [1, 2', {"a": [1, 2]}),
        ('{"a": {"b": [1, {"c": "x', {"a": {"b": [1, {"c": "x"}]}}),
        ('{"a": tr', {}),
        ('{"a": 1, "b": tru', {"a": 1}),
        ('{"a": 12', {"a": 12}),
        ('{"a": "x\\', {}),
        ('{"a": 1, "b": "x\\', {"a": 1}),
        ('{"a": "say \\"hi\\" to', {"a": 'say "hi" to'}),
        ('{"a": "comma, inside", "b', {"a": "comma, inside"}),
        ('```json\n{"title": "x", "n": 3}\n```', {"title": "x", "n": 3}),
        ('{"done": true} trailing prose', {"done": True}),
        ("[1, 2]", None),
    ],
)
def test_partial_object(text: str, expected: dict[str, Any] | None) -> None:
    assert partial_object(text) == expected


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-1000, 1000) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)


@given(st.dictionaries(st.text(max_size=6), json_values, max_size=4))
def test_every_prefix_reads_as_a_subset_of_the_final_object(document: dict[str, Any]) -> None:
    text = json.dumps(document)
    assert partial_object(text) == document
    for end in range(len(text)):
        partial = partial_object(text[:end])
        assert partial is None or set(partial) <= set(document)


def test_strict_json_reads_bare_or_fenced_documents() -> None:
    assert strict_json(' {"a": 1} ') == {"a": 1}
    assert strict_json('Here:\n```json\n{"a": 1}\n```') == {"a": 1}
    assert strict_json("```\n[1]\n```") == [1]
    with pytest.raises(ValueError, match="not valid JSON"):
        strict_json('{"a": ')
    with pytest.raises(ValueError, match="not valid JSON"):
        strict_json("no json here")

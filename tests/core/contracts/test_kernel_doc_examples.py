"""The runnable examples of agent-kernel.md that need no test doubles, with their printed output.

Imports are translated by the spec's import map (``agentkit.core.X`` -> ``core.X``). The two
examples built on ``core.testing`` (the smallest thing that works, the ``Call`` example) belong
with the test doubles.
"""

from __future__ import annotations

import pytest


def test_checkpoint_payload_is_frozen(capsys: pytest.CaptureFixture[str]) -> None:
    from core.contracts.ports import Checkpoint, CheckpointStatus

    cp = Checkpoint(
        run_id="r1",
        version=1,
        state={"turn": 3},
        created_at=0.0,
        status=CheckpointStatus.RUNNING,
    )
    try:
        cp.state = {}  # type: ignore[misc]
    except Exception as exc:
        print(type(exc).__name__)
    try:
        cp.state["turn"] = 99  # type: ignore[index]
    except TypeError:
        print("refused too, now")

    assert capsys.readouterr().out == "FrozenInstanceError\nrefused too, now\n"


def test_tool_call_and_chat_request_payloads_are_frozen(capsys: pytest.CaptureFixture[str]) -> None:
    import copy
    import json
    import pickle

    from core.contracts.types import ChatRequest, Message, ToolCall

    tc = ToolCall(id="c1", name="search", arguments={"q": "octopus", "filters": {"tags": ["marine"]}})

    print(isinstance(tc.arguments, dict), json.dumps(tc.arguments))
    print(tc == copy.deepcopy(tc), pickle.loads(pickle.dumps(tc)) == tc)

    try:
        tc.arguments["q"] = "squid"  # type: ignore[index]
    except TypeError as exc:
        print("refused:", str(exc)[:46])
    try:
        tc.arguments["filters"]["tags"].append("deep")
    except TypeError:
        print("refused one level down too")

    req = ChatRequest(messages=[Message("user", "hi")], model="fake-model")
    try:
        req.messages.append(Message("user", "and again"))  # type: ignore[attr-defined]
    except TypeError:
        print("a request in flight cannot be rewritten in place")

    assert capsys.readouterr().out.splitlines() == [
        'True {"q": "octopus", "filters": {"tags": ["marine"]}}',
        "True True",
        "refused: FrozenDict does not support item assignment",
        "refused one level down too",
        "a request in flight cannot be rewritten in place",
    ]


def test_a_partial_object_reports_which_fields_arrived(capsys: pytest.CaptureFixture[str]) -> None:
    from pydantic import BaseModel

    class Article(BaseModel):
        title: str
        body: str

    partial = Article.model_construct(title="Octopus cognition")
    print("title" in partial.model_fields_set)
    print("body" in partial.model_fields_set)

    assert capsys.readouterr().out == "True\nFalse\n"

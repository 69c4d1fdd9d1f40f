"""CollectingObserver keeps observations in order and refuses them after close()."""

from __future__ import annotations

import pytest

from core.contracts.ports import Observation, ObserverPort
from core.runtime.observers import CollectingObserver, ObserverClosed


async def test_keeps_every_observation_in_order() -> None:
    sink = CollectingObserver()
    assert isinstance(sink, ObserverPort)
    await sink.emit(Observation("step", "one"))
    await sink.emit(Observation("result", "two"))
    assert [o.render for o in sink.items] == ["one", "two"]
    assert sink.kinds() == ["step", "result"]


async def test_refuses_observations_after_close() -> None:
    sink = CollectingObserver()
    await sink.close()
    assert sink.closed
    with pytest.raises(ObserverClosed, match="'late'"):
        await sink.emit(Observation("late"))
    assert sink.items == []

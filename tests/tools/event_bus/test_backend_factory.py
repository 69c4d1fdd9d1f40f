"""``EVENT_BUS_URL`` is turned into a backend by ``factory.py``; the abstract seam names no broker."""

from __future__ import annotations

import pytest

from tests.core.test_core_purity import imports_of
from tests.kit import PROJECT
from tools.event_bus.backend import InProcessBackend
from tools.event_bus.factory import make_backend
from tools.event_bus.redis_backend import RedisStreamsBackend


def test_the_abstract_backend_module_imports_no_concrete_backend() -> None:
    path = PROJECT / "tools" / "event_bus" / "backend.py"
    modules = [module for _, module in imports_of(path)]
    assert not [m for m in modules if "redis" in m], modules


@pytest.mark.parametrize("url", ["", "  ", "memory://", "MEMORY://"])
def test_empty_or_memory_is_the_in_process_backend(url: str) -> None:
    assert isinstance(make_backend(url), InProcessBackend)


def test_redis_urls_are_redis_streams() -> None:
    backend = make_backend("redis://127.0.0.1:6379/0")
    assert isinstance(backend, RedisStreamsBackend)


def test_an_unknown_scheme_is_refused_with_the_variable_named() -> None:
    with pytest.raises(ValueError, match="EVENT_BUS_URL scheme 'kafka' is not supported"):
        make_backend("kafka://localhost")

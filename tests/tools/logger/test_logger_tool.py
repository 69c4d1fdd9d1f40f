"""The logger tool: levels, sinks with identity, the logging module routed through it, isolation."""

from __future__ import annotations

import contextvars
import logging
import re
import threading
from collections.abc import AsyncIterator
from datetime import datetime, timedelta

import pytest

from core.context import bound, current_identity_var, current_plugin_var
from tools.logger.logger_tool import LoggerTool, stderr_sink

Line = tuple[str, str, str, "str | None"]


class Collector:
    def __init__(self) -> None:
        self.lines: list[Line] = []
        self.threads: list[int] = []

    def __call__(self, level: str, message: str, timestamp: str, identity: str | None) -> None:
        self.lines.append((level, message, timestamp, identity))
        self.threads.append(threading.get_ident())

    def messages(self) -> list[str]:
        return [line[1] for line in self.lines]


@pytest.fixture
async def logger(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[LoggerTool]:
    monkeypatch.delenv("LOG_LEVEL", raising=False)
    tool = LoggerTool()
    tool.remove_sink(stderr_sink)  # keep test output quiet; the stderr sink has its own test
    await tool.setup()
    try:
        yield tool
    finally:
        await tool.shutdown()


async def test_sinks_receive_level_message_utc_timestamp_and_identity(logger: LoggerTool) -> None:
    sink = Collector()
    logger.add_sink(sink)
    with bound(current_identity_var, "demo.Orders.create"):
        logger.info("created order %s for %s", 7, "ann")
    [(level, message, timestamp, identity)] = sink.lines
    assert (level, message, identity) == ("INFO", "created order 7 for ann", "demo.Orders.create")
    assert datetime.fromisoformat(timestamp).utcoffset() == timedelta(0)


async def test_every_level_has_its_method(logger: LoggerTool, monkeypatch: pytest.MonkeyPatch) -> None:
    await logger.shutdown()
    monkeypatch.setenv("LOG_LEVEL", "debug")
    await logger.setup()
    sink = Collector()
    logger.add_sink(sink)
    logger.debug("d")
    logger.info("i")
    logger.warning("w")
    logger.error("e")
    logger.critical("c")
    assert [(line[0], line[1]) for line in sink.lines] == [
        ("DEBUG", "d"),
        ("INFO", "i"),
        ("WARNING", "w"),
        ("ERROR", "e"),
        ("CRITICAL", "c"),
    ]


async def test_log_level_filters_lower_levels(logger: LoggerTool, monkeypatch: pytest.MonkeyPatch) -> None:
    await logger.shutdown()
    monkeypatch.setenv("LOG_LEVEL", "WARNING")
    await logger.setup()
    sink = Collector()
    logger.add_sink(sink)
    logger.info("hidden")
    logger.warning("shown")
    assert sink.messages() == ["shown"]


async def test_an_unknown_log_level_fails_setup(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOG_LEVEL", "VERBOSE")
    with pytest.raises(ValueError, match="LOG_LEVEL"):
        await LoggerTool().setup()


async def test_the_logging_module_is_routed_through_the_sinks_until_shutdown(logger: LoggerTool) -> None:
    sink = Collector()
    logger.add_sink(sink)
    library = logging.getLogger("some.library")
    with bound(current_identity_var, "demo.Worker.run"):
        library.warning("disk %d%% full", 91)
    library.warning("outside plugin code")
    assert [(line[1], line[3]) for line in sink.lines] == [
        ("disk 91% full", "demo.Worker.run"),
        ("outside plugin code", None),
    ]
    await logger.shutdown()
    library.warning("after shutdown")
    assert len(sink.lines) == 2


async def test_shutdown_restores_the_root_level(monkeypatch: pytest.MonkeyPatch) -> None:
    root = logging.getLogger()
    before = root.level
    monkeypatch.setenv("LOG_LEVEL", "DEBUG")
    tool = LoggerTool()
    await tool.setup()
    assert root.level == logging.DEBUG
    await tool.shutdown()
    assert root.level == before
    assert not any(type(h).__name__ == "_SinkHandler" for h in root.handlers)


async def test_exception_logs_the_traceback(logger: LoggerTool) -> None:
    sink = Collector()
    logger.add_sink(sink)
    try:
        raise ValueError("boom")
    except ValueError:
        logger.exception("charging failed for order %s", 7)
    [(level, message, _, _)] = sink.lines
    assert level == "ERROR"
    assert message.startswith("charging failed for order 7\nTraceback (most recent call last):")
    assert message.endswith("ValueError: boom")


async def test_a_raising_sink_is_reported_once_and_never_breaks_the_caller(
    logger: LoggerTool, capsys: pytest.CaptureFixture[str]
) -> None:
    def broken(level: str, message: str, timestamp: str, identity: str | None) -> None:
        raise RuntimeError("sink down")

    good = Collector()
    logger.add_sink(broken)
    logger.add_sink(good)
    logger.info("one")
    logger.info("two")
    assert good.messages() == ["one", "two"]
    err = capsys.readouterr().err
    assert err.count("RuntimeError: sink down") == 1


async def test_sinks_called_from_worker_threads_see_that_threads_identity(logger: LoggerTool) -> None:
    sink = Collector()
    logger.add_sink(sink)
    with bound(current_identity_var, "demo.Import.worker"):
        context = contextvars.copy_context()
    thread = threading.Thread(target=context.run, args=(logger.info, "from a thread"))
    thread.start()
    thread.join(10)
    assert sink.lines[0][1:2] + sink.lines[0][3:] == ("from a thread", "demo.Import.worker")
    assert sink.threads == [thread.ident]


async def test_release_owner_removes_the_sinks_of_that_plugin(logger: LoggerTool) -> None:
    mine, theirs, kept = Collector(), Collector(), Collector()
    with bound(current_plugin_var, "demo.Audit"):
        logger.add_sink(mine)
    with bound(current_plugin_var, "demo.Other"):
        logger.add_sink(theirs)
    logger.add_sink(kept)
    logger.release_owner("demo.Audit")
    logger.remove_sink(theirs)
    logger.info("after")
    assert (mine.lines, theirs.lines, kept.messages()) == ([], [], ["after"])


async def test_a_sink_that_logs_does_not_feed_itself(
    logger: LoggerTool, capsys: pytest.CaptureFixture[str]
) -> None:
    calls: list[str] = []

    def chatty(level: str, message: str, timestamp: str, identity: str | None) -> None:
        calls.append(message)
        logging.getLogger("chatty").warning("sink saw %s", message)

    logger.add_sink(chatty)
    logger.info("original")
    assert calls == ["original"]
    assert "sink saw original" in capsys.readouterr().err


async def test_the_default_stderr_line_is_readable(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("LOG_LEVEL", raising=False)
    tool = LoggerTool()
    await tool.setup()
    try:
        with bound(current_identity_var, "demo.Hello.greet"):
            tool.info("hello %s", "ann")
        logging.getLogger("uvicorn.error").warning("server busy")
    finally:
        await tool.shutdown()
    lines = capsys.readouterr().err.splitlines()
    stamp = r"\d\d:\d\d:\d\d"
    assert re.fullmatch(stamp + r" INFO demo\.Hello\.greet: hello ann", lines[0])
    assert re.fullmatch(stamp + r" WARNING uvicorn\.error: server busy", lines[1])


async def test_a_sink_must_be_callable(logger: LoggerTool) -> None:
    with pytest.raises(TypeError):
        logger.add_sink("not a sink")  # type: ignore[arg-type]


async def test_a_sink_taking_a_fifth_parameter_gets_the_active_trace_and_span_ids(
    logger: LoggerTool, capsys: pytest.CaptureFixture[str]
) -> None:
    from opentelemetry.sdk.trace import TracerProvider

    traced: list[object] = []
    plain = Collector()
    logger.add_sink(lambda level, message, timestamp, identity, trace: traced.append(trace))
    logger.add_sink(plain)
    logger.add_sink(stderr_sink)
    logger.info("outside any span")
    provider = TracerProvider()
    with provider.get_tracer("test").start_as_current_span("work") as span:
        logger.info("inside the span")
    context = span.get_span_context()
    ids = (f"{context.trace_id:032x}", f"{context.span_id:016x}")
    assert traced == [None, ids]
    assert plain.messages() == ["outside any span", "inside the span"]  # four-parameter sinks unchanged
    err = capsys.readouterr().err.splitlines()
    assert err[0].endswith("outside any span")
    assert err[1].endswith("inside the span")  # ids are for machines: LOG_FORMAT=json carries them
    provider.shutdown()

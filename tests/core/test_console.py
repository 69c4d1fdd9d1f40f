"""The console line format: who decides colour, what a line and a JSON line hold, where a failure is."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from core.console import Style, failure_where, format_line, log_format, short_name, style_for


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(
    ("stream", "environ", "colour"),
    [
        (io.StringIO(), {}, False),
        (Terminal(), {}, True),
        (Terminal(), {"NO_COLOR": "1"}, False),
        (io.StringIO(), {"FORCE_COLOR": "1"}, True),
        (Terminal(), {"NO_COLOR": "1", "FORCE_COLOR": "1"}, True),
        (Terminal(), {"FORCE_COLOR": "0", "NO_COLOR": "1"}, False),
    ],
)
def test_colour_follows_the_terminal_then_no_color_then_force_color(
    stream: io.StringIO, environ: dict[str, str], colour: bool
) -> None:
    assert style_for(stream, environ).colour is colour


def test_a_plain_line_is_time_level_name_message() -> None:
    line = format_line("ERROR", "it broke", 0.0, short_name("keel.kernel"), style=Style())
    assert line.endswith(" ERROR kernel: it broke")
    assert len(line.split(" ", 1)[0]) == len("12:00:05")


def test_a_json_line_carries_the_trace_ids() -> None:
    line = format_line("INFO", "hi", 0.0, "demo.A.on_boot", ("a" * 32, "b" * 16), style=Style(json=True))
    assert json.loads(line) == {
        "time": "1970-01-01T00:00:00.000+00:00",
        "level": "INFO",
        "name": "demo.A.on_boot",
        "message": "hi",
        "trace_id": "a" * 32,
        "span_id": "b" * 16,
    }


def test_log_format_refuses_what_it_does_not_know() -> None:
    assert log_format({"LOG_FORMAT": "JSON"}) == "json"
    with pytest.raises(ValueError, match="LOG_FORMAT must be one of json, text, got 'xml'"):
        log_format({"LOG_FORMAT": "xml"})


def test_the_failure_is_placed_in_the_project_file_not_the_library(tmp_path: Path) -> None:
    plugin = tmp_path / "domains" / "demo" / "plugins" / "p.py"
    plugin.parent.mkdir(parents=True)
    plugin.write_text("import json\n\ndef boot():\n    json.loads('{')\n")
    namespace: dict[str, object] = {}
    exec(compile(plugin.read_text(), str(plugin), "exec"), namespace)
    with pytest.raises(ValueError) as caught:
        namespace["boot"]()  # type: ignore[operator]
    assert failure_where(caught.value, tmp_path) == "domains/demo/plugins/p.py:4"

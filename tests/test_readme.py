"""The README's tour works as written: its plugin, dropped into a root, answers what it says."""

from __future__ import annotations

import re
from pathlib import Path

import httpx

from tests.kit import PROJECT, make_root, serving, write


def readme_plugin() -> str:
    text = (PROJECT / "README.md").read_text(encoding="utf-8")
    match = re.search(r"Drop this into `(?P<path>[^`]+)`:\n\n```python\n(?P<code>.*?)```", text, re.S)
    assert match, "the README's tour has a plugin to drop in"
    assert match["path"] == "domains/hello/plugins/greet.py"
    return match["code"]


async def test_the_tour_plugin_answers_as_the_readme_says(tmp_path: Path) -> None:
    root = make_root(tmp_path, tools=("http", "logger", "system"), domains=("system",))
    write(root, "domains/hello/plugins/greet.py", readme_plugin())
    async with serving(root) as (kernel, base_url), httpx.AsyncClient(base_url=base_url) as client:
        ada = await client.get("/hello/ada")
        assert ada.status_code == 200
        assert ada.json() == {"greeting": "hello ada", "request_id": ada.headers["x-request-id"]}
        nobody = await client.get("/hello/nobody")
        assert nobody.status_code == 404
        assert nobody.json()["error"]["kind"] == "not_found"
        assert nobody.json()["error"]["message"] == "nobody is not here"
        status = (await client.get("/system/status")).json()
        assert status["plugins"]["hello.Greet"]["status"] == "READY"
        assert status["plugins"]["hello.Greet"]["dependencies"] == ["http", "logger"]

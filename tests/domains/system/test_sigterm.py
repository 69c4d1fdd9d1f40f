"""SIGTERM on a real process: the in-flight request completes, on_shutdown runs, the exit code is 0."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
import textwrap
from pathlib import Path

import httpx
import pytest

from tests.kit import PROJECT, make_root, write

SLOW_PLUGIN = """
    import asyncio
    from pathlib import Path

    from core import BasePlugin

    ROOT = Path(__file__).resolve().parents[3]


    class Slow(BasePlugin):
        def __init__(self, http, logger):
            self.http = http
            self.logger = logger

        def on_boot(self):
            self.http.add_endpoint("/slow", "GET", self.slow)

        async def slow(self, data, context):
            self.logger.info("slow request entered")
            for _ in range(2000):  # the test releases it once shutdown has begun (20 s at most)
                if (ROOT / "release").exists():
                    return {"finished": True}
                await asyncio.sleep(0.01)
            return {"finished": False}

        def on_shutdown(self):
            (ROOT / "on_shutdown_ran").write_text("yes")
"""


class Output:
    """The process's merged output, read line by line until an expected line shows up."""

    def __init__(self, stream: asyncio.StreamReader) -> None:
        self.stream = stream
        self.lines: list[str] = []

    async def wait_for(self, pattern: str) -> re.Match[str]:
        try:
            async with asyncio.timeout(30):
                while True:
                    raw = await self.stream.readline()
                    if not raw:
                        break
                    line = raw.decode(errors="replace").rstrip("\n")
                    self.lines.append(line)
                    match = re.search(pattern, line)
                    if match:
                        return match
        except TimeoutError:
            pass
        pytest.fail(f"no line matching {pattern!r} in the output:\n" + "\n".join(self.lines))


async def test_sigterm_drains_the_in_flight_request_then_shuts_down(tmp_path: Path) -> None:
    root = make_root(tmp_path, tools=("http", "logger", "system"), domains=("system",))
    write(root, "domains/demo/plugins/slow.py", SLOW_PLUGIN)
    script = root / "run.py"
    script.write_text(
        textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(PROJECT)!r})
        from core import Kernel
        sys.exit(Kernel({str(root)!r}).run())
    """)
    )
    env = {
        **os.environ,
        "PORT": "0",
        "HOST": "127.0.0.1",
        "LOG_LEVEL": "INFO",
        "SHUTDOWN_GRACE_SECONDS": "20",
    }
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(script),
        env=env,
        cwd=root,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    assert process.stdout is not None
    output = Output(process.stdout)
    try:
        url = (await output.wait_for(r"serving on (http://\S+)")).group(1)
        async with httpx.AsyncClient(base_url=url, timeout=30) as client:
            request = asyncio.create_task(client.get("/slow"))
            await output.wait_for(r"slow request entered")
            process.send_signal(signal.SIGTERM)
            await output.wait_for(r"Shutting down")
            assert not request.done()
            (root / "release").write_text("go")
            response = await request
        assert response.status_code == 200
        assert response.json() == {"finished": True}
        await output.wait_for(r"Finished server process")
        async with asyncio.timeout(30):
            returncode = await process.wait()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert returncode == 0, "\n".join(output.lines)
    assert (root / "on_shutdown_ran").read_text() == "yes"

"""``SubprocessSpawn``: the real spawn seam, launching a CLI as an operating-system process.

It satisfies ``core.contracts.cli.CliSpawnPort``: ``await spawn(invocation)`` starts
``invocation.argv`` with pipes on stdin, stdout and stderr, in ``invocation.cwd``, with the parent's
environment plus ``invocation.env``. stdout is read a line at a time with a generous line limit
(``line_limit`` bytes; a CLI writes whole tool outputs on one line); stderr is drained in the
background into a bounded buffer (the last ``stderr_limit`` bytes), so a chatty process can never
block on a full stderr pipe. A binary that is not found raises ``FileNotFoundError`` naming it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os

from core.contracts.cli import CliInvocation

__all__ = ["SubprocessCli", "SubprocessSpawn"]


class SubprocessCli:
    """A running CLI process (a ``CliProcess``)."""

    def __init__(self, process: asyncio.subprocess.Process, stderr_limit: int) -> None:
        self._process = process
        self._stderr = bytearray()
        self._limit = stderr_limit
        self._drain = asyncio.create_task(self._drain_stderr())

    async def _drain_stderr(self) -> None:
        stream = self._process.stderr
        if stream is None:
            return
        while chunk := await stream.read(65536):
            self._stderr.extend(chunk)
            if len(self._stderr) > self._limit:
                del self._stderr[: len(self._stderr) - self._limit]

    async def readline(self) -> bytes:
        stream = self._process.stdout
        if stream is None:
            return b""
        try:
            return await stream.readline()
        except ValueError:
            # The line outgrew the limit; hand back what is buffered so the reader reports it.
            return await stream.read(65536)

    async def write(self, data: bytes) -> None:
        stdin = self._process.stdin
        if stdin is None:
            raise BrokenPipeError("the process has no stdin")
        stdin.write(data)
        await stdin.drain()

    async def close_stdin(self) -> None:
        stdin = self._process.stdin
        if stdin is not None and not stdin.is_closing():
            stdin.close()
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                await stdin.wait_closed()

    async def wait(self) -> int:
        code = await self._process.wait()
        with contextlib.suppress(asyncio.CancelledError):
            await self._drain
        return code

    def kill(self) -> None:
        if self._process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self._process.kill()

    def stderr_text(self) -> str:
        return self._stderr.decode("utf-8", errors="replace")


class SubprocessSpawn:
    """Launches each invocation as a subprocess."""

    def __init__(self, *, line_limit: int = 16 * 1024 * 1024, stderr_limit: int = 64 * 1024) -> None:
        self.line_limit = line_limit
        self.stderr_limit = stderr_limit

    async def __call__(self, invocation: CliInvocation) -> SubprocessCli:
        env = {**os.environ, **invocation.env} if invocation.env else None
        try:
            process = await asyncio.create_subprocess_exec(
                *invocation.argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                cwd=invocation.cwd,
                env=env,
                limit=self.line_limit,
            )
        except FileNotFoundError as exc:
            raise FileNotFoundError(f"cannot launch {invocation.argv[0]!r}: {exc.strerror}") from exc
        return SubprocessCli(process, self.stderr_limit)

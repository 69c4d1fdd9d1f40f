"""The ``coding_cli`` tool: coding-agent CLIs (``claude``, ``codex``) as cognitions a plugin can use.

A plugin asks for ``coding_cli`` by name and builds an agent whose thinking is a CLI session::

    class CoderPlugin(BasePlugin):
        def __init__(self, coding_cli, llm, container): ...
        async def on_boot(self):
            agent = Agent("coder", "claude-sonnet-4-5", self.coding_cli.claude(permission_mode="acceptEdits"))

``claude(**options)`` returns a ``ClaudeCliCognition`` (:mod:`tools.coding_cli.claude`),
``codex(**options)`` a ``CodexCliCognition`` and ``codex_session(thread_id=None, **options)`` a
``CodexCliSession`` (:mod:`tools.coding_cli.codex`); the options are those classes' own. Every
cognition spawns through ``SubprocessSpawn`` (:mod:`tools.coding_cli.spawn`), so the binaries are
launched as processes and nothing is imported from them. The cognitions are also importable
directly (``from tools.coding_cli.codex import CodexCliCognition``) by code outside plugins, and take
``spawn=`` there, which is how a test puts ``core.testing.FakeClaudeCli`` / ``FakeCodexCli`` in.

This is its own tool, not part of ``llm``: a CLI binary is a different external system from an
OpenAI-compatible HTTP server (another process, another way of failing), and a service may have one
without the other.

Settings: ``CLAUDE_CLI_BIN`` (default ``claude``) and ``CODEX_CLI_BIN`` (default ``codex``): the
executables, looked up on ``PATH`` when not a path; ``CODING_CLI_CWD`` (default: the process's own)
the directory the sessions work in. ``setup()`` does not require the binaries: a missing one makes
the run that spawns it end with ``FileNotFoundError`` naming it.
"""

from __future__ import annotations

from typing import Any

from core import BaseTool
from core.settings import env_str
from tools.coding_cli.claude import ClaudeCliCognition
from tools.coding_cli.codex import CodexCliCognition, CodexCliSession
from tools.coding_cli.spawn import SubprocessSpawn


class CodingCliTool(BaseTool):
    """Coding-agent CLIs as cognitions: ``claude()``, ``codex()``, ``codex_session()``."""

    name = "coding_cli"

    def __init__(self) -> None:
        self.claude_bin = "claude"
        self.codex_bin = "codex"
        self.cwd: str | None = None
        self.spawn = SubprocessSpawn()

    async def setup(self) -> None:
        self.claude_bin = env_str("CLAUDE_CLI_BIN", "claude")
        self.codex_bin = env_str("CODEX_CLI_BIN", "codex")
        self.cwd = env_str("CODING_CLI_CWD") or None

    def claude(self, **options: Any) -> ClaudeCliCognition:
        """A ``ClaudeCliCognition`` launching ``CLAUDE_CLI_BIN``."""
        options.setdefault("binary", self.claude_bin)
        options.setdefault("cwd", self.cwd)
        return ClaudeCliCognition(spawn=self.spawn, **options)

    def codex(self, **options: Any) -> CodexCliCognition:
        """A ``CodexCliCognition`` (a fresh thread per run) launching ``CODEX_CLI_BIN``."""
        options.setdefault("binary", self.codex_bin)
        options.setdefault("cwd", self.cwd)
        return CodexCliCognition(spawn=self.spawn, **options)

    def codex_session(self, thread_id: str | None = None, **options: Any) -> CodexCliSession:
        """A ``CodexCliSession`` on ``thread_id`` (or a new thread) launching ``CODEX_CLI_BIN``."""
        options.setdefault("binary", self.codex_bin)
        options.setdefault("cwd", self.cwd)
        return CodexCliSession(spawn=self.spawn, thread_id=thread_id, **options)

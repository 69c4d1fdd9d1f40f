"""Run an agent in a unit test: no key, no network, no wall-clock waiting, the same result every time.

``make_test_ctx`` builds a real ``RunContext`` (it is not a fake). The ``Fake*`` / ``Recording*``
classes are the doubles, one per port, each recording what a test asserts on. Production code never
imports this package; the ``Null*`` / ``Noop*`` objects that ship live in ``core.runtime``.
``FakeClaudeCli`` / ``FakeCodexCli`` stand in for a coding-agent CLI at the spawn seam; the value types
they share with the real spawner (``CliRun``, ``CliStderr``, ``CliInvocation``) are in
``core.contracts.cli``.
"""

from core.testing.capabilities import FakeCompactor, FakeGrounder
from core.testing.cli import FakeClaudeCli, FakeCodexCli, claude_turn, codex_turn
from core.testing.clock import FakeClock
from core.testing.ctx import FakeCtx, make_test_ctx
from core.testing.llm import DEFAULT_USAGE, FakeLLM, ScriptExhausted, Turn
from core.testing.memory import FakeMemory
from core.testing.tools import FakeTool
from core.testing.tracing import RecordingSpan, RecordingTracer
from core.testing.web import FakeFetch, FakeSearch

__all__ = [
    "DEFAULT_USAGE",
    "FakeClaudeCli",
    "FakeCodexCli",
    "FakeClock",
    "FakeCompactor",
    "FakeCtx",
    "FakeFetch",
    "FakeGrounder",
    "FakeLLM",
    "FakeMemory",
    "FakeSearch",
    "FakeTool",
    "RecordingSpan",
    "RecordingTracer",
    "ScriptExhausted",
    "Turn",
    "claude_turn",
    "codex_turn",
    "make_test_ctx",
]

"""Agents: ``Agent`` and its result, and (in ``core.agents.cognition``) how it thinks.

``Agent(name, model, cognition=None, system=None, output_type=None)`` runs with a single model call
by default; ``ReActCognition(tools=[...])`` gives it a tool loop. ``run_agents`` fans agents out
with carved budgets; a ``TerminationCondition`` is a run's own graceful stop. See
``core.agents.agent`` for the run's spans and stop rules.
"""

from core.agents.agent import Agent
from core.agents.capabilities import Compactor, Grounder
from core.agents.cognition import Cognition, ReActCognition, SingleCallCognition
from core.agents.compactors import WindowCompactor
from core.agents.fanout import AgentTask, run_agents
from core.agents.output import OutputTypeError
from core.agents.request_builder import RequestBuilder
from core.agents.result import AgentResult, StopReason
from core.agents.session import AgentRun, InvokerMissing
from core.agents.termination import MaxModelCalls, StopWhen, TerminationCondition, TextMentions
from core.agents.working_context import WorkingContext

__all__ = [
    "Agent",
    "AgentResult",
    "AgentRun",
    "AgentTask",
    "Cognition",
    "Compactor",
    "Grounder",
    "InvokerMissing",
    "MaxModelCalls",
    "OutputTypeError",
    "ReActCognition",
    "RequestBuilder",
    "SingleCallCognition",
    "StopReason",
    "StopWhen",
    "TerminationCondition",
    "TextMentions",
    "WindowCompactor",
    "WorkingContext",
    "run_agents",
]

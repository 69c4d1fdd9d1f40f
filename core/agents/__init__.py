"""Agents: ``Agent`` and its result, and (in ``core.agents.cognition``) how it thinks.

``Agent(name, model, cognition=None, system=None, output_type=None)`` runs with a single model call
by default; ``ReActCognition(tools=[...])`` gives it a tool loop. See ``core.agents.agent`` for the
run's spans and stop rules.
"""

from core.agents.agent import Agent
from core.agents.capabilities import Compactor, Grounder
from core.agents.cognition import Cognition, ReActCognition, SingleCallCognition
from core.agents.output import OutputTypeError
from core.agents.result import AgentResult, StopReason
from core.agents.session import AgentRun, InvokerMissing

__all__ = [
    "Agent",
    "AgentResult",
    "AgentRun",
    "Cognition",
    "Compactor",
    "Grounder",
    "InvokerMissing",
    "OutputTypeError",
    "ReActCognition",
    "SingleCallCognition",
    "StopReason",
]

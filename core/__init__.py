"""Keel's microkernel: what plugin and tool authors import.

``from core import Kernel, BaseTool, BasePlugin`` is the whole surface a service needs; the agent
kernel lives in the subpackages (``core.contracts``, ``core.runtime``, ``core.agents`` ...).
"""

from core.base_plugin import BasePlugin
from core.base_tool import BaseTool
from core.container import Container, ToolProxy
from core.context import current_event_id_var, current_identity_var
from core.errors import (
    ConflictError,
    ForbiddenError,
    InvalidInputError,
    KeelError,
    KernelBootError,
    NotFoundError,
    RequestError,
    ServiceUnavailableError,
    ToolNotConfiguredError,
    ToolNotFoundError,
    ToolUnavailableError,
    TooManyRequestsError,
    UnauthorizedError,
)
from core.kernel import Kernel
from core.registry import Lifecycle, PluginStatus, Registry, ToolStatus

__all__ = [
    "BasePlugin",
    "BaseTool",
    "ConflictError",
    "Container",
    "ForbiddenError",
    "InvalidInputError",
    "KeelError",
    "Kernel",
    "KernelBootError",
    "NotFoundError",
    "Lifecycle",
    "PluginStatus",
    "Registry",
    "RequestError",
    "ServiceUnavailableError",
    "TooManyRequestsError",
    "ToolNotConfiguredError",
    "ToolNotFoundError",
    "ToolProxy",
    "ToolStatus",
    "ToolUnavailableError",
    "UnauthorizedError",
    "current_event_id_var",
    "current_identity_var",
]

"""The ``context_manager`` tool: keeps AI_CONTEXT.md in step with the tree, and models in the dump.

On ``on_boot_complete`` (every plugin has booted), and again after every batch of plugin files
loaded, reloaded or unloaded at run time (``on_plugins_changed``), it:

1. reads every ``domains/<d>/models/*.py`` with ``ast`` and stores a summary per file (classes,
   bases, first doc line, fields) in the registry as the domain's ``models`` metadata, which the
   system dump and ``registry.get_domain_metadata()`` then show. A summary rather than the file's
   text: the dump stays small and serialisable, and the source is one ``open()`` away;
2. renders AI_CONTEXT.md exactly as ``make docs`` does (:func:`tools.context.reference.ai_context`):
   a function of the project's files only — never of the run (which tools are OFF, which plugins
   failed: that is the system dump), the machine or the environment — so booting a clean checkout
   renders the committed bytes;
3. writes it only when the text changed, atomically (a temporary file in the same directory,
   fsynced, then ``os.replace``), so a reader never sees half a file, an unchanged tree leaves
   the file (and ``git status``) alone, and a plugin added under live reload appears in it.

Configuration: ``AI_CONTEXT_ENABLED`` (default true; false turns the tool OFF) and
``CONTEXT_FILE`` (default ``AI_CONTEXT.md`` at the project root; a relative path is taken from the
root). :meth:`ContextTool.regenerate` runs steps 1–3 again.
"""

from __future__ import annotations

import logging
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core import BaseTool, ToolNotConfiguredError
from core.settings import env_flag, env_str

from .atomic_write import write_if_changed
from .reference import ai_context, scan_domains
from .render import DomainView
from .source_scan import ModelFile

if TYPE_CHECKING:
    from core import Container

log = logging.getLogger("keel.context")

DEFAULT_FILE = "AI_CONTEXT.md"


class ContextTool(BaseTool):
    """Keeps AI_CONTEXT.md (guide, tool reference, domains) in step with the tree at boot and reload."""

    name = "context_manager"

    def __init__(self) -> None:
        self.context_file: Path | None = None
        self._container: Container | None = None

    async def setup(self) -> None:
        if not env_flag("AI_CONTEXT_ENABLED", default=True):
            raise ToolNotConfiguredError(
                "AI_CONTEXT.md generation is off: AI_CONTEXT_ENABLED is false (set it to true to turn it on)"
            )
        configured = env_str("CONTEXT_FILE", DEFAULT_FILE)
        path = Path(configured)
        self.context_file = path if path.is_absolute() else self.project_root / path

    async def on_boot_complete(self, container: Container) -> None:
        self._container = container
        if self.context_file is not None:
            self.regenerate()

    async def on_plugins_changed(self, container: Container) -> None:
        """Plugin files were loaded, reloaded or unloaded while the service runs: describe it again."""
        self._container = container
        if self.context_file is not None:
            self.regenerate()

    def regenerate(self) -> bool:
        """Rescan the tree and rewrite AI_CONTEXT.md if it changed; True when it was written."""
        if self.context_file is None or self._container is None:
            return False
        for domain in scan_domains(self.project_root):
            self.kernel_registry.set_domain_metadata(domain.name, "models", _models_metadata(domain))
        written = write_if_changed(self.context_file, ai_context(self.project_root))
        log.info("%s %s", "wrote" if written else "unchanged:", self.context_file)
        return written


def _models_metadata(domain: DomainView) -> dict[str, Any]:
    return {model_file.relative: _model_summary(model_file) for model_file in domain.model_files}


def _model_summary(model_file: ModelFile) -> dict[str, Any]:
    if model_file.error is not None:
        return {"error": model_file.error, "classes": []}
    return {"classes": [asdict(cls) for cls in model_file.classes]}

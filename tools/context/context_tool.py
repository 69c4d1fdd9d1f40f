"""The ``context_manager`` tool: describes the project in AI_CONTEXT.md on every boot.

On ``on_boot_complete`` (every plugin has booted) it:

1. reads every ``domains/<d>/models/*.py`` with ``ast`` and stores a summary per file (classes,
   bases, first doc line, fields) in the registry as the domain's ``models`` metadata, which the
   system dump and ``registry.get_domain_metadata()`` then show. A summary rather than the file's
   text: the dump stays small and serialisable, and the source is one ``open()`` away;
2. renders AI_CONTEXT.md (:mod:`tools.context.render`): every tool with its status and
   ``get_interface_description()``, every domain with its plugins and their statuses, endpoints,
   events and models, and what is not running; the same tree always gives the same bytes;
3. writes it only when the text changed, atomically (a temporary file in the same directory,
   fsynced, then ``os.replace``), so a reader never sees half a file and an unchanged tree leaves
   the file's modification time alone.

Configuration: ``AI_CONTEXT_ENABLED`` (default true; false turns the tool OFF) and
``CONTEXT_FILE`` (default ``AI_CONTEXT.md`` at the project root; a relative path is taken from the
root). :meth:`ContextTool.regenerate` runs steps 1–3 again; the kernel has it done after every
batch of plugin files loaded, reloaded or unloaded at run time (``on_plugins_changed``).
"""

from __future__ import annotations

import logging
import os
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core import BaseTool, ToolNotConfiguredError
from core.settings import env_flag

from .render import DomainView, ToolView, render
from .source_scan import ModelFile, scan_model_file, scan_plugin_file

if TYPE_CHECKING:
    from core import Container

log = logging.getLogger("keel.context")

DEFAULT_FILE = "AI_CONTEXT.md"


class ContextTool(BaseTool):
    """Regenerates AI_CONTEXT.md (tools, domains, endpoints, events, models) on every boot."""

    name = "context_manager"

    def __init__(self) -> None:
        self.context_file: Path | None = None
        self._container: Container | None = None

    async def setup(self) -> None:
        if not env_flag("AI_CONTEXT_ENABLED", default=True):
            raise ToolNotConfiguredError(
                "AI_CONTEXT.md generation is off: AI_CONTEXT_ENABLED is false (set it to true to turn it on)"
            )
        configured = os.environ.get("CONTEXT_FILE", "").strip() or DEFAULT_FILE
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
        domains = self._scan_domains()
        for domain in domains:
            self.kernel_registry.set_domain_metadata(domain.name, "models", _models_metadata(domain))
        dump = self.kernel_registry.get_system_dump()
        text = render(self._tool_views(dump["tools"]), domains, dump["plugins"], dump["load_errors"])
        written = write_if_changed(self.context_file, text)
        log.info("%s %s", "wrote" if written else "unchanged:", self.context_file)
        return written

    def _scan_domains(self) -> list[DomainView]:
        domains_dir = self.project_root / "domains"
        if not domains_dir.is_dir():
            return []
        views = []
        for directory in sorted(
            p for p in domains_dir.iterdir() if p.is_dir() and not p.name.startswith((".", "__"))
        ):
            plugin_files = [
                scan_plugin_file(path, self._relative(path)) for path in _python_files(directory / "plugins")
            ]
            model_files = [
                scan_model_file(path, self._relative(path)) for path in _python_files(directory / "models")
            ]
            if plugin_files or model_files:
                views.append(DomainView(directory.name, plugin_files, model_files))
        return views

    def _portable(self, message: str | None) -> str | None:
        """A status message with this checkout's absolute path removed, so the file is the same on
        every machine that boots the same tree."""
        if message is None:
            return None
        return message.replace(f"{self.project_root}{os.sep}", "").replace(str(self.project_root), ".")

    def _tool_views(self, tools: dict[str, dict[str, Any]]) -> list[ToolView]:
        raw = self._container.get_raw_tools() if self._container is not None else {}
        views = []
        for name, state in sorted(tools.items()):
            tool = raw.get(name)
            try:
                description = (
                    tool.get_interface_description() if tool is not None else f"{name}: not constructed"
                )
            except Exception as exc:
                log.warning("tool %s: get_interface_description() raised %s", name, exc, exc_info=exc)
                description = f"{name}: description unavailable ({type(exc).__name__})"
            # An OK tool's message describes this boot (paths, counts): only a reason is kept.
            message = None if state["status"] == "OK" else self._portable(state.get("message"))
            views.append(ToolView(name, str(state["status"]), message, description))
        return views

    def _relative(self, path: Path) -> str:
        return path.relative_to(self.project_root).as_posix()


def write_if_changed(path: Path, text: str) -> bool:
    """Replace ``path`` with ``text`` atomically unless it already holds exactly that; True if written."""
    data = text.encode("utf-8")
    try:
        if path.read_bytes() == data:
            return False
        mode = path.stat().st_mode & 0o777
    except FileNotFoundError:
        mode = 0o644
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return True


def _python_files(directory: Path) -> list[Path]:
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.glob("*.py") if not p.name.startswith("_"))


def _models_metadata(domain: DomainView) -> dict[str, Any]:
    return {model_file.relative: _model_summary(model_file) for model_file in domain.model_files}


def _model_summary(model_file: ModelFile) -> dict[str, Any]:
    if model_file.error is not None:
        return {"error": model_file.error, "classes": []}
    return {"classes": [asdict(cls) for cls in model_file.classes]}

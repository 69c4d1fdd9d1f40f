"""AI_CONTEXT.md's "this project" part as text: a pure function of what the source scan read.

The output is deterministic — every list sorted, no timestamps, no absolute paths, no statuses of
a run — so the same tree renders to the same bytes on every machine and the file diffs cleanly in
review. Which plugins or tools are running right now is the system dump's business
(``/system/status``), never this file's. Text from the source (docstrings, syntax errors) is
flattened to one line and ``|`` is escaped, so it can never break a table.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from .source_scan import ModelFile, PluginFile


@dataclass(frozen=True)
class DomainView:
    name: str
    plugin_files: list[PluginFile]
    model_files: list[ModelFile]


def render_project(domains: Iterable[DomainView]) -> list[str]:
    """The "what this project holds" section, as markdown lines."""
    return _domains(sorted(domains, key=lambda d: d.name))


def _domains(domains: list[DomainView]) -> list[str]:
    lines = ["## Domains", ""]
    if not domains:
        return [*lines, "No domains.", ""]
    for domain in domains:
        lines += [f"### `{domain.name}`", ""]
        lines += _plugins_of(domain)
        lines += _endpoints_of(domain)
        lines += _events_of(domain)
        lines += _models_of(domain)
    return lines


def _plugins_of(domain: DomainView) -> list[str]:
    rows = []
    for plugin_file in sorted(domain.plugin_files, key=lambda f: f.relative):
        if plugin_file.error is not None:
            rows.append(f"| — | `{plugin_file.relative}` | unreadable: {_cell(plugin_file.error)} |")
        for cls in sorted(plugin_file.classes, key=lambda c: c.name):
            plugin_id = f"{domain.name}.{cls.name}"
            tools = ", ".join(f"`{t}`" for t in cls.tools) or "—"
            rows.append(f"| `{plugin_id}` | `{plugin_file.relative}` | {tools} |")
    if not rows:
        return ["No plugins.", ""]
    return ["**Plugins**", "", "| plugin | file | injects |", "|---|---|---|", *rows, ""]


def _endpoints_of(domain: DomainView) -> list[str]:
    endpoints = sorted(
        (
            (e.path, e.method, e.auth, e.request_model or "", e.sse, f"{domain.name}.{e.owner}")
            for f in domain.plugin_files
            for e in f.endpoints
        ),
    )
    if not endpoints:
        return []
    lines = [
        "**Endpoints**",
        "",
        "| method | path | auth | request model | plugin |",
        "|---|---|---|---|---|",
    ]
    for path, method, auth, model, sse, owner in endpoints:
        kind = f"{method} (SSE)" if sse else method
        model_cell = f"`{model}`" if model else "—"
        lines.append(f"| {kind} | `{_cell(path)}` | {auth} | {model_cell} | `{owner}` |")
    return [*lines, ""]


def _events_of(domain: DomainView) -> list[str]:
    published = sorted({e for f in domain.plugin_files for e in f.publishes})
    subscribed = sorted({e for f in domain.plugin_files for e in f.subscribes})
    if not published and not subscribed:
        return []
    return [
        "**Events**",
        "",
        f"- publishes: {', '.join(f'`{e}`' for e in published) or '—'}",
        f"- subscribes to: {', '.join(f'`{e}`' for e in subscribed) or '—'}",
        "",
    ]


def _models_of(domain: DomainView) -> list[str]:
    files = sorted(domain.model_files, key=lambda f: f.relative)
    if not files:
        return []
    lines = ["**Models**", ""]
    for model_file in files:
        if model_file.error is not None:
            lines.append(f"- `{model_file.relative}`: unreadable: {_cell(model_file.error)}")
        for cls in model_file.classes:
            bases = f"({', '.join(cls.bases)})" if cls.bases else ""
            doc = f" — {_cell(cls.doc)}" if cls.doc else ""
            lines.append(f"- `{cls.name}{bases}` in `{model_file.relative}`{doc}")
            for item in cls.fields:
                annotation = f": {item.annotation}" if item.annotation else ""
                optional = " (optional)" if item.has_default and item.annotation else ""
                lines.append(f"  - `{item.name}{annotation}`{optional}")
    return [*lines, ""]


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")

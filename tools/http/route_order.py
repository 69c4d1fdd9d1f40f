"""Routes have owners, and the most specific path wins.

Two rules the http tool applies whenever routes are registered or swapped:

- ``/system`` and everything under it belongs to the system domains, ``HTTP_SYSTEM_DOMAINS``
  (comma separated; default ``system,dashboard``, the dashboard being the system's own page): a
  plugin of another domain registering there is refused (a domain sorting before ``system`` could
  otherwise answer ``GET /system/status``, with its own auth, in place of the real one).
- Keel's routes are kept ordered most specific first, segment by segment: a literal segment beats
  a typed parameter (``{id:int}``), which beats a plain one (``{id}``), which beats ``{p:path}``.
  So ``GET /x/me`` is served by its own handler even when ``GET /x/{id}`` was registered before it.
  Each such pair is reported (:func:`shadowing`) so the dump says which route would have hidden
  which. Two routes that match exactly the same requests (``/x/{a}`` and ``/x/{b}``) are refused:
  one of them could never be served.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from core.settings import env_list

SYSTEM_PREFIX = "/system"
DEFAULT_SYSTEM_DOMAINS = "system,dashboard"

_PARAMETER = re.compile(r"{[^}]*}")


def check_owner(path: str, owner: str | None) -> None:
    """Refuse a ``/system`` path to a plugin of another domain (``owner`` is ``<domain>.<Class>``)."""
    if owner is None or not (path == SYSTEM_PREFIX or path.startswith(SYSTEM_PREFIX + "/")):
        return
    domain = owner.partition(".")[0]
    allowed = system_domains()
    if domain not in allowed:
        raise ValueError(
            f"{path}: paths under {SYSTEM_PREFIX}/ belong to the system domains "
            f"({', '.join(sorted(allowed))}, see HTTP_SYSTEM_DOMAINS); "
            f"{owner} (domain {domain!r}) cannot register one "
            f"(choose a path under /{domain}/)"
        )


def system_domains() -> frozenset[str]:
    default = tuple(name.strip() for name in DEFAULT_SYSTEM_DOMAINS.split(","))
    return frozenset(env_list("HTTP_SYSTEM_DOMAINS", default))


def _segment_rank(segment: str) -> int:
    if not _PARAMETER.search(segment):
        return 0
    if segment.startswith("{") and segment.endswith("}") and _PARAMETER.fullmatch(segment):
        convertor = segment[1:-1].partition(":")[2]
        if convertor == "path":
            return 3
        return 2 if convertor in ("", "str") else 1
    return 1  # a literal part around the parameter ("file.{ext}") is more specific than a bare one


def specificity(path: str) -> tuple[int, ...]:
    """The sort key: lower is more specific, compared segment by segment."""
    return tuple(_segment_rank(segment) for segment in path.strip("/").split("/"))


def ordered(routes: Sequence[Any], is_keel: Any) -> list[Any]:
    """``routes`` with the Keel routes (``is_keel(route)``) sorted most specific first, stably, in
    the slots they already occupy: the framework's own routes (docs, mounts) do not move."""
    slots = [i for i, route in enumerate(routes) if is_keel(route)]
    keel = sorted((routes[i] for i in slots), key=lambda route: specificity(route.path))
    result = list(routes)
    for slot, route in zip(slots, keel, strict=True):
        result[slot] = route
    return result


def shadowing(new: Any, existing: Iterable[Any]) -> list[dict[str, Any]]:
    """The pairs in which ``new`` and an existing route would hide one another, most specific
    first; raises ``ValueError`` for two routes that match exactly the same requests."""
    notes: list[dict[str, Any]] = []
    for other in existing:
        if other is new or not (set(other.methods or ()) & set(new.methods or ())):
            continue
        hides_new = other.path_regex.match(new.path) is not None
        hidden_by_new = new.path_regex.match(other.path) is not None
        if hides_new and hidden_by_new:
            raise ValueError(
                f"{new.spec.method} {new.path} matches exactly the requests {other.spec.method} {other.path} "
                f"(of {other.spec.owner or 'no plugin'}) matches: one of them could never be served"
            )
        if hides_new or hidden_by_new:
            first, second = (new, other) if hides_new else (other, new)
            notes.append(
                {
                    "served_first": f"{first.spec.method} {first.path}",
                    "owner": first.spec.owner,
                    "before": f"{second.spec.method} {second.path}",
                    "before_owner": second.spec.owner,
                    "why": "the more specific path wins; registered in the other order it would be hidden",
                }
            )
    return notes

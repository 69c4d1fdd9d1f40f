"""``keel status [--url URL] [--token TOKEN]``: what a running instance says about itself, for a terminal.

It fetches the system dump (``GET /system/status``, the system domain's) and the readiness report
(``GET /system/health``) and prints: the process (lifecycle, uptime, pid, host), the health, every
tool with its status (OK / FAIL / DEAD / OFF) and message, every plugin with its status and error,
and the files that failed to load. The URL defaults to ``HOST``/``PORT`` from the environment and
the root's ``.env`` (the http tool's settings); the dump needs an admin token once authentication
is configured: ``--token``, else ``KEEL_TOKEN`` (``keel users token NAME`` prints one). ``--json``
prints the dump as it came. Nothing listening is a clear error, exit status 1.
"""

from __future__ import annotations

import argparse
import json
import sys
import urllib.error
import urllib.request
from typing import Any

from core.cli.project import CommandError, load_environment, project_root
from core.console import style_for
from core.settings import env_str

STATUS_PATH = "/system/status"
HEALTH_PATH = "/system/health"
_GOOD = {"OK", "READY", "ok"}
_BAD = {"FAIL", "DEAD", "unavailable"}


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "status",
        help="show a running instance's tools, plugins, load errors, health and uptime",
        description=f"Fetch a running instance's system dump ({STATUS_PATH}) and print it readably.",
    )
    parser.add_argument("--url", help="the instance (default: http://HOST:PORT from the environment / .env)")
    parser.add_argument("--token", help="an admin bearer token (default: KEEL_TOKEN)")
    parser.add_argument(
        "--timeout", type=float, default=5.0, help="seconds to wait for an answer (default 5)"
    )
    parser.add_argument("--json", action="store_true", help="print the system dump as JSON")
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    load_environment(project_root(args))
    url = (args.url or default_url()).rstrip("/")
    token = args.token or env_str("KEEL_TOKEN") or None
    code, dump = fetch(url + STATUS_PATH, token, args.timeout)
    if code in (401, 403):
        raise CommandError(
            f"{url}{STATUS_PATH} answered {code}: it needs an admin token; pass --token or set KEEL_TOKEN "
            "(`keel users token NAME` prints one for an admin account)"
        )
    if code != 200 or not isinstance(dump, dict) or "tools" not in dump:
        raise CommandError(f"{url}{STATUS_PATH} answered {code}, not a Keel system dump: {_short(dump)}")
    if args.json:
        print(json.dumps(dump, indent=2, default=str))
        return 0
    try:
        _, health = fetch(url + HEALTH_PATH, token, args.timeout)
    except CommandError:
        health = None
    print("\n".join(render(url, dump, health if isinstance(health, dict) else None)))
    return 0


def default_url() -> str:
    """``http://HOST:PORT`` as the http tool reads them; a wildcard host is reached on loopback."""
    host = env_str("HOST", "127.0.0.1")
    port = env_str("PORT", "8000")
    if host in ("0.0.0.0", ""):
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"http://{host}:{port}"


def fetch(url: str, token: str | None, timeout: float) -> tuple[int, Any]:
    """``(status, decoded JSON body)``; an error status still returns its body."""
    request = urllib.request.Request(url, headers={"Accept": "application/json"})
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            code, body = response.status, response.read()
    except urllib.error.HTTPError as exc:
        code, body = exc.code, exc.read()
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise CommandError(
            f"nothing answers at {url} ({reason}); is the service running (`keel run`)? "
            "Pass --url for another address"
        ) from None
    try:
        return code, json.loads(body)
    except ValueError:
        return code, body.decode(errors="replace")


def render(url: str, dump: dict[str, Any], health: dict[str, Any] | None) -> list[str]:
    paint = _painter()
    kernel = dump.get("kernel", {})
    process = kernel.get("process", {})
    lines = [
        f"Keel at {url}: {kernel.get('lifecycle', '?')}, up {_duration(kernel.get('uptime_s'))}, "
        f"pid {process.get('pid', '?')} on {process.get('host', '?')}"
    ]
    if health is not None:
        state = str(health.get("status", "?"))
        line = f"health: {paint(state, state)}"
        problems = [*health.get("reasons", []), *health.get("degraded", [])]
        details = [
            f"{p.get('tool') or p.get('plugin') or p.get('process')} {p.get('status') or ''}".strip()
            + (f" ({p['message']})" if p.get("message") else "")
            for p in problems
        ]
        dead = health.get("dead_plugins") or {}
        if dead:
            details.append(f"{len(dead)} plugin(s) DEAD")
        lines.append(line + (": " + "; ".join(details) if details else ""))
    tools: dict[str, Any] = dump.get("tools", {})
    lines.append(f"tools ({len(tools)}):")
    width = max((len(n) for n in tools), default=0)
    for name, tool in tools.items():
        status = str(tool.get("status"))
        message = tool.get("message") or ""
        lines.append(f"  {paint(f'{status:<4}', status)}  {name:<{width}}  {message}".rstrip())
    plugins: dict[str, Any] = dump.get("plugins", {})
    dead = sum(1 for p in plugins.values() if p.get("status") == "DEAD")
    lines.append(f"plugins ({len(plugins)}, {dead} dead):")
    width = max((len(n) for n in plugins), default=0)
    for plugin_id, plugin in plugins.items():
        status = str(plugin.get("status"))
        note = plugin.get("error") or plugin.get("degraded") or plugin.get("reload_error") or ""
        if plugin.get("degraded") and not plugin.get("error"):
            note = f"degraded: {note}"
        where = plugin.get("file") or ""
        text = f"  {paint(f'{status:<7}', status)}  {plugin_id:<{width}}  {where}"
        lines.append((text + (f"  {note}" if note else "")).rstrip())
    load_errors: dict[str, str] = dump.get("load_errors") or {}
    lines.append(f"load errors ({len(load_errors)}):" if load_errors else "load errors: none")
    for file, error in load_errors.items():
        lines.append(f"  {paint(file, 'FAIL')}: {error}")
    return lines


def _painter() -> Any:
    colour = style_for(sys.stdout).colour

    def paint(text: str, status: str) -> str:
        if not colour:
            return text
        code = "32" if status in _GOOD else "31" if status in _BAD else "33"
        return f"\033[{code}m{text}\033[0m"

    return paint


def _duration(seconds: Any) -> str:
    if not isinstance(seconds, int | float):
        return "?"
    whole = int(seconds)
    days, rest = divmod(whole, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d {hours}h {minutes:02d}m"
    if hours:
        return f"{hours}h {minutes:02d}m {secs:02d}s"
    return f"{minutes}m {secs:02d}s" if minutes else f"{secs}s"


def _short(body: Any) -> str:
    text = body if isinstance(body, str) else json.dumps(body, default=str)
    return text[:200]

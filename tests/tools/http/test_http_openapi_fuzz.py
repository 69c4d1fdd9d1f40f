"""The OpenAPI document is the truth: a schema-driven fuzzer (schemathesis) finds no failure.

A kernel boots the project's users, auth wiring, system and dashboard domains and serves them;
schemathesis generates requests for every operation from ``/openapi.json`` (a bounded number each,
so the suite stays quick) and checks every answer against the document: status codes, media
types, response bodies, headers, that schema-valid requests are accepted and invalid ones refused.
With auth off, ``auth=True`` operations answer a documented 503 (auth is not configured), so there
the "no server error" check becomes "no 5xx but that 503 envelope". With auth on, requests carry
an admin token. Event-stream operations are left out: a 200 never ends.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.core.result import Err

from core import Kernel
from tests.kit import PROJECT, make_root, serving

EXAMPLES = 40


@pytest.fixture(autouse=True)
def service_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [n for n in os.environ if n.startswith(("AUTH_", "LOGIN_", "DATABASE_", "HTTP_"))]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("LOG_LEVEL", "WARNING")


def project(tmp_path: Path) -> Path:
    root = make_root(
        tmp_path,
        tools=("http", "auth", "db", "event_bus", "logger", "system"),
        domains=("users", "auth_wiring", "system", "dashboard"),
    )
    (root / "migrations").mkdir()
    (root / "migrations" / "users").symlink_to(PROJECT / "migrations" / "users", target_is_directory=True)
    return root


def only_the_documented_unavailable(ctx: Any, response: Any, case: Any) -> bool | None:
    """With auth off: a 5xx must be the 503 envelope saying a tool (auth) is unavailable."""
    if response.status_code < 500:
        return None
    assert response.status_code == 503, f"{response.status_code}: {response.text[:300]}"
    assert json.loads(response.text)["error"]["kind"] == "unavailable"
    return None


def fuzz(
    raw_schema: dict[str, Any], url: str, headers: dict[str, str], auth_on: bool
) -> tuple[list[str], dict[str, int]]:
    """Every failure schemathesis finds, one line each (operation, check, reproducing curl), and
    how many requests each operation was sent."""
    schema = schemathesis.openapi.from_dict(raw_schema)
    failures: list[str] = []
    calls: dict[str, int] = {}
    options: dict[str, Any] = {}
    if not auth_on:
        options = {
            "excluded_checks": [not_a_server_error],
            "additional_checks": [schemathesis.check(only_the_documented_unavailable)],
        }

    def fuzz_one(operation: Any) -> None:
        label = operation.label

        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            database=None,
            derandomize=True,
            suppress_health_check=list(HealthCheck),
            phases=[Phase.explicit, Phase.generate],
        )
        @given(case=operation.as_strategy())
        def check(case: Any) -> None:
            calls[label] = calls.get(label, 0) + 1
            try:
                case.call_and_validate(base_url=url, headers=headers, timeout=10, **options)
            except BaseException as exc:  # noqa: B036 - schemathesis raises groups of failures
                for failure in getattr(exc, "exceptions", [exc]):
                    title = getattr(failure, "title", type(failure).__name__)
                    failures.append(f"{label}: {title}: {case.as_curl_command()[:300]}")

        check()

    for result in schema.get_all_operations():
        if isinstance(result, Err):
            raise AssertionError(f"the schema has an operation schemathesis cannot read: {result.err()}")
        operation = result.ok()
        if "text/event-stream" in json.dumps(operation.definition.raw.get("responses", {}).get("200", {})):
            continue
        fuzz_one(operation)
    return failures, calls


@pytest.mark.parametrize("auth_on", [False, True], ids=["auth-off", "auth-on"])
async def test_the_service_does_what_its_openapi_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, auth_on: bool
) -> None:
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path / 'keel.db'}")
    if auth_on:
        monkeypatch.setenv("AUTH_SECRET_KEY", "fuzz-secret-" + "x" * 40)
        monkeypatch.setenv("AUTH_SCRYPT_LOG2_N", "4")
        monkeypatch.setenv("AUTH_SCRYPT_P", "1")
    kernel: Kernel
    async with serving(project(tmp_path)) as (kernel, url):
        headers: dict[str, str] = {}
        if auth_on:
            token = kernel.container.get("auth").create_token("fuzzer", {"roles": ["admin"]})
            headers["Authorization"] = f"Bearer {token}"
        async with httpx.AsyncClient(base_url=url) as client:
            raw_schema = (await client.get("/openapi.json")).json()
        schemes = raw_schema.get("components", {}).get("securitySchemes", {})
        assert ("bearerAuth" in schemes) is auth_on
        failures, calls = await asyncio.to_thread(fuzz, raw_schema, url, headers, auth_on)
    assert failures == [], "\n".join(sorted(set(failures)))
    for must in ("POST /users/login", "POST /users/register", "GET /system/events/tree"):
        assert calls.get(must, 0) >= 3, f"{must} was hardly fuzzed: {calls}"
    assert {"GET /users/me", "GET /system/status", "GET /system/health"} <= set(calls), calls

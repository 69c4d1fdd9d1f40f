"""What FastAPI cannot know about Keel's routes, added to the generated OpenAPI document.

- Protected operations declare the ``bearerAuth`` security scheme (so ``/docs`` has an Authorize
  button) and their 401 (and 403 for admin ones). Which operations are protected follows the
  service's state: with no token validator installed ``auth="admin"`` operations are open and
  ``auth=True`` ones answer 503, and the document says so.
- Event-stream operations answer ``text/event-stream`` only with 200; their errors are JSON
  envelopes like every other operation's. The 200 documents the event shape (``id``, ``event``,
  ``data``, ``retry`` lines) and the ``Last-Event-ID`` header / ``last_event_id`` and
  ``access_token`` query parameters they accept.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from .auth import ADMIN, OPTIONAL
from .endpoint import EndpointSpec

SCHEME = "bearerAuth"
ENVELOPE_REF = {"$ref": "#/components/schemas/ErrorEnvelope"}
SSE_EVENT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": (
        "One server-sent event: `id: <id>`, `event: <name>`, `retry: <ms>` and `data: <text>` lines "
        "ending with a blank line. `data` is JSON unless the stream sends plain text; an `event: error` "
        "carries the error envelope; `: keep-alive` comments arrive when nothing else was sent."
    ),
    "properties": {
        "id": {"type": "string"},
        "event": {"type": "string"},
        "data": {"description": "the payload: JSON (an object, usually) or text"},
        "retry": {"type": "integer", "minimum": 0},
    },
    "required": ["data"],
}
SSE_PARAMETERS: list[dict[str, Any]] = [
    {
        "name": "Last-Event-ID",
        "in": "header",
        "required": False,
        "schema": {"type": "string"},
        "description": "resume after this event id (what a reconnecting EventSource sends)",
    },
    {
        "name": "last_event_id",
        "in": "query",
        "required": False,
        "schema": {"type": "string"},
        "description": "the same as the Last-Event-ID header, for clients that cannot set headers",
    },
]
TOKEN_QUERY: dict[str, Any] = {
    "name": "access_token",
    "in": "query",
    "required": False,
    "schema": {"type": "string"},
    "description": "the bearer token, for an EventSource that cannot send an Authorization header",
}


def _json_error(description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": ENVELOPE_REF}}}


def document_keel(
    schema: dict[str, Any], specs: Mapping[tuple[str, str], EndpointSpec], validator_installed: bool
) -> None:
    """Complete ``schema`` (FastAPI's document for the routes ``specs``) in place."""
    protected = False
    for path, item in schema.get("paths", {}).items():
        for method, operation in item.items():
            spec = specs.get((method.upper(), path))
            if spec is None or not isinstance(operation, dict):
                continue
            responses = operation.setdefault("responses", {})
            if spec.query_model is not None:
                _document_query(operation, spec.query_model)
            if spec.sse:
                _document_stream(operation, responses, spec)
            if spec.auth is True and not validator_installed:
                responses["503"] = _json_error("auth is not configured on this server")
            elif spec.auth == OPTIONAL and validator_installed:
                protected = True  # a token is read when sent; anonymous callers are let through too
                operation["security"] = [{SCHEME: []}, {}]
                responses["401"] = _json_error("a malformed, expired or invalid bearer token")
            elif spec.auth is True or (spec.auth == ADMIN and validator_installed):
                protected = True
                operation["security"] = [{SCHEME: []}]
                responses["401"] = _json_error("a missing, malformed, expired or invalid bearer token")
                if spec.auth == ADMIN:
                    responses["403"] = _json_error("the token is valid but not an admin's")
    if protected:
        components = schema.setdefault("components", {})
        components.setdefault("securitySchemes", {})[SCHEME] = {
            "type": "http",
            "scheme": "bearer",
            "bearerFormat": "JWT",
            "description": "a token from POST /users/login",
        }


def _document_query(operation: dict[str, Any], query_model: type[BaseModel]) -> None:
    """The query parameters' schemas are the model's fields', constraints included."""
    properties = query_model.model_json_schema().get("properties", {})
    for parameter in operation.get("parameters", []):
        if parameter.get("in") == "query" and parameter.get("name") in properties:
            field_schema = dict(properties[parameter["name"]])
            if "description" in field_schema:
                parameter["description"] = field_schema.pop("description")
            parameter["schema"] = field_schema


def _document_stream(operation: dict[str, Any], responses: dict[str, Any], spec: EndpointSpec) -> None:
    for status, response in responses.items():
        if status in ("200", "default"):
            continue
        content = response.get("content")
        if content:
            response["content"] = {"application/json": {"schema": ENVELOPE_REF}}
    responses["200"] = {
        "description": "a stream of server-sent events",
        "content": {
            "text/event-stream": {
                "schema": {"type": "string", "description": SSE_EVENT_SCHEMA["description"]},
                "x-event-schema": SSE_EVENT_SCHEMA,
            }
        },
    }
    parameters = operation.setdefault("parameters", [])
    known = {(p.get("name"), p.get("in")) for p in parameters}
    extra = [*SSE_PARAMETERS, TOKEN_QUERY] if spec.auth else SSE_PARAMETERS
    parameters.extend(p for p in extra if (p["name"], p["in"]) not in known)

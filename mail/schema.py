"""OpenAPI for the two paths Channels serves (drf-spectacular cannot see them): a postprocessing
hook adds GET /inboxes/{id}/wait and GET /inboxes/{id}/stream with their parameters and answers."""

from __future__ import annotations

from typing import Any

ERROR = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorOut"}}}
INBOX_ID = {
    "in": "path",
    "name": "inbox_id",
    "required": True,
    "schema": {"type": "string"},
    "description": "The inbox id (inb_…) or its full address.",
}


def _errors(*extra: str) -> dict[str, Any]:
    out = {
        "400": {"description": "validation_error (bad query parameter).", "content": ERROR},
        "401": {"description": "unauthorized.", "content": ERROR},
        "403": {"description": "insufficient_scope.", "content": ERROR},
        "404": {"description": "not_found: no such inbox in your workspace.", "content": ERROR},
        "429": {"description": "rate_limited.", "content": ERROR},
    }
    return {k: v for k, v in out.items() if k not in extra}


def _security() -> list[dict[str, list[str]]]:
    return [{"bearerAuth": ["read"]}, {"sessionAuth": ["read"]}]


def add_streaming_paths(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict:
    paths = result.setdefault("paths", {})
    paths["/api/v1/inboxes/{inbox_id}/wait"] = {
        "get": {
            "operationId": "waitForEmail",
            "tags": ["Emails"],
            "description": (
                "Long-poll: returns the oldest email received at or after `since` that matches "
                "`from` and `subject` — at once if one is already there, else the moment one is "
                "stored — or 204 with no body when `timeout` passes. The request holds no thread "
                "and no database connection while it waits.\n\nRequired scope: `read`."
            ),
            "parameters": [
                INBOX_ID,
                {
                    "in": "query",
                    "name": "timeout",
                    "schema": {"type": "integer", "minimum": 0, "maximum": 120, "default": 30},
                    "description": "Seconds to wait.",
                },
                {
                    "in": "query",
                    "name": "from",
                    "schema": {"type": "string", "maxLength": 320},
                    "description": "The sender (`Name <address>`) must contain this, any case.",
                },
                {
                    "in": "query",
                    "name": "subject",
                    "schema": {"type": "string", "maxLength": 500},
                    "description": "Case-insensitive regular expression (Python syntax) the "
                    "subject must match; an invalid one is a validation_error.",
                },
                {
                    "in": "query",
                    "name": "since",
                    "schema": {"type": "string", "format": "date-time"},
                    "description": "Default: the time of the request.",
                },
            ],
            "security": _security(),
            "x-required-scope": "read",
            "responses": {
                "200": {
                    "description": "The full email record.",
                    "content": {
                        "application/json": {"schema": {"$ref": "#/components/schemas/EmailOut"}}
                    },
                },
                "204": {"description": "Nothing matched before the timeout."},
                **_errors(),
            },
        }
    }
    paths["/api/v1/inboxes/{inbox_id}/stream"] = {
        "get": {
            "operationId": "streamInbox",
            "tags": ["Emails"],
            "description": (
                "Server-Sent Events of one inbox: `email.received`, `email.labeled`, "
                "`email.updated`, `email.deleted`, `mail.rejected`. Every message has `id:`, "
                "`event:` and a JSON `data:` line (camelCase keys, `at` in Unix milliseconds). "
                "Reconnect with `Last-Event-ID` (or `?last_event_id=`) to receive exactly the "
                "events missed (kept for `EVENT_RETENTION_HOURS`, at least one hour). A comment "
                "line keeps the connection alive every 15 s. Clients that cannot set headers "
                "(browser EventSource) may pass the key as `?access_token=`; dashboard sessions "
                "work as they are.\n\nRequired scope: `read`."
            ),
            "parameters": [
                INBOX_ID,
                {
                    "in": "header",
                    "name": "Last-Event-ID",
                    "schema": {"type": "string"},
                    "required": False,
                },
                {
                    "in": "query",
                    "name": "last_event_id",
                    "schema": {"type": "integer"},
                    "required": False,
                },
                {
                    "in": "query",
                    "name": "access_token",
                    "schema": {"type": "string"},
                    "required": False,
                },
            ],
            "security": _security(),
            "x-required-scope": "read",
            "responses": {
                "200": {
                    "description": "An endless text/event-stream.",
                    "content": {"text/event-stream": {"schema": {"type": "string"}}},
                },
                **_errors("400"),
            },
        }
    }
    return result

"""OpenAPI for the two paths Channels serves (drf-spectacular cannot see them): a postprocessing
hook adds GET /inboxes/{id}/wait and GET /inboxes/{id}/stream with their parameters and answers."""

from __future__ import annotations

from typing import Any

from config.api.schema import error_responses, link

INBOX_ID = {
    "in": "path",
    "name": "inbox_id",
    "required": True,
    "schema": {"type": "string"},
    "description": "The inbox id (inb_…) or its full address (case-insensitive; a plus tag, "
    "`alpha+x@…`, names the inbox its mail lands in: `alpha@…`).",
}


STREAM_EVENT = {
    "type": "object",
    "required": ["id", "event", "data"],
    "properties": {
        "id": {
            "type": "string",
            "pattern": "^[0-9]+$",
            "description": "The event id; send it back as Last-Event-ID to resume.",
        },
        "event": {
            "enum": [
                "email.received",
                "email.labeled",
                "email.updated",
                "email.deleted",
                "mail.rejected",
            ]
        },
        "data": {
            "type": "string",
            "contentMediaType": "application/json",
            "description": "A JSON object with camelCase keys: type, inboxId, at (Unix ms), and "
            "per event emailId, from, subject, code, labels, read, starred, reason. "
            "`mail.rejected` of a fault the inbox's `smtp_faults` injected also has "
            "`injected: true`, `code` (the SMTP reply code) and `stage` (`rcpt` or `data`).",
        },
    },
}


def _errors() -> dict[str, Any]:
    return error_responses(body=False, path_ids=True)


def _security() -> list[dict[str, list[str]]]:
    return [{"bearerAuth": ["read"]}, {"sessionAuth": ["read"]}]


def add_streaming_paths(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict:
    paths = result.setdefault("paths", {})
    paths["/api/v1/inboxes/{inbox_id}/wait"] = {
        "get": {
            "operationId": "waitForEmail",
            "summary": "Wait for an email",
            "tags": ["Emails"],
            "description": (
                "Long-poll: returns the oldest email received at or after `since` that matches "
                "`from` and `subject` — at once if one is already there, else the moment one is "
                "stored — or 204 with no body when `timeout` passes. The request holds no thread "
                "and no database connection while it waits. Open waits and streams (and outbox "
                "`?wait=` requests) of one key or session count together against "
                "`MAX_OPEN_STREAMS_PER_KEY`; beyond it, 429 `rate_limited` with `Retry-After`."
                "\n\nRequired scope: `read`."
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
                    "subject must match; an invalid one is a validation_error, and so is one whose "
                    "bounded repeats (`{n}`, `{m,n}`) multiply past 100,000. It is matched against "
                    "the first 100,000 characters of a subject with a time limit "
                    "(`PATTERN_TIMEOUT_MS`) and a budget for the whole wait "
                    "(`PATTERN_BUDGET_MS`): a match that runs out of time counts as no match.",
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
                    "links": {
                        "GetEmail": link("getEmail", "The email.", email_id="$response.body#/id"),
                        "UpdateEmail": link(
                            "updateEmail", "Mark or label it.", email_id="$response.body#/id"
                        ),
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
            "summary": "Follow an inbox (Server-Sent Events)",
            "tags": ["Emails"],
            "description": (
                "Server-Sent Events of one inbox: `email.received`, `email.labeled`, "
                "`email.updated`, `email.deleted`, `mail.rejected`. Every message has `id:`, "
                "`event:` and a JSON `data:` line (camelCase keys, `at` in Unix milliseconds). "
                "Reconnect with `Last-Event-ID` (or `?last_event_id=`) to receive exactly the "
                "events missed (kept for `EVENT_RETENTION_HOURS`, at least one hour). A comment "
                "line keeps the connection alive every 15 s. Clients that cannot set headers "
                "(browser EventSource) may pass the key as `?access_token=`; dashboard sessions "
                "work as they are. Open streams and waits (and outbox `?wait=` requests) of one "
                "key or session count together against `MAX_OPEN_STREAMS_PER_KEY`; beyond it, "
                "429 `rate_limited` with `Retry-After`.\n\nRequired scope: `read`."
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
                    "schema": {"type": "integer", "minimum": 0},
                    "required": False,
                },
                {
                    "in": "query",
                    "name": "access_token",
                    "schema": {"type": "string", "minLength": 1, "maxLength": 200},
                    "required": False,
                },
                {
                    "in": "query",
                    "name": "timeout",
                    "schema": {"type": "integer", "minimum": 0, "maximum": 86400},
                    "required": False,
                    "description": "End the stream after this many seconds; 0 sends the events "
                    "missed since Last-Event-ID (or last_event_id) and ends. Omitted: the stream "
                    "stays open until the client leaves.",
                },
            ],
            "security": _security(),
            "x-required-scope": "read",
            "responses": {
                "200": {
                    "description": "An endless text/event-stream (comment lines keep it alive). "
                    "The schema describes one event, as OpenAPI 3.1 tools read an event stream.",
                    "content": {"text/event-stream": {"schema": STREAM_EVENT}},
                },
                **_errors(),
            },
        }
    }
    return result

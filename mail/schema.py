"""OpenAPI for the paths Channels serves (drf-spectacular cannot see them): a postprocessing hook
adds GET /inboxes/{id}/wait, GET /emails/wait and GET /inboxes/{id}/stream with their parameters
and answers. The wait filters are ``mail.waiting.WaitQuery``'s, described once here for both."""

from __future__ import annotations

from typing import Any

from config.api.schema import error_responses, link
from mail.serializers import LinkOut

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


def _errors(*extra: tuple[int, str]) -> dict[str, Any]:
    return error_responses(body=False, path_ids=True, extra=extra)


def _security() -> list[dict[str, list[str]]]:
    return [{"bearerAuth": ["read"]}, {"sessionAuth": ["read"]}]


def _query(name: str, schema: dict[str, Any], description: str, **extra: Any) -> dict[str, Any]:
    return {"in": "query", "name": name, "schema": schema, "description": description, **extra}


PATTERN_BOUNDS = (
    "It is matched against the first 100,000 characters with a time limit "
    "(`PATTERN_TIMEOUT_MS`) and a budget for the whole wait (`PATTERN_BUDGET_MS`): a match that "
    "runs out of time counts as no match. An invalid pattern is a validation_error, and so is one "
    "whose bounded repeats (`{n}`, `{m,n}`) multiply past 100,000."
)

# The filters of both waits (mail.waiting.WaitQuery), combined with AND.
WAIT_FILTERS = [
    _query(
        "timeout",
        {"type": "integer", "minimum": 0, "maximum": 120, "default": 30},
        "Seconds to wait.",
    ),
    _query(
        "since",
        {"type": "string", "format": "date-time"},
        "Emails received at or after it count. Default: the time of the request (only new mail).",
    ),
    _query(
        "from",
        {"type": "string", "maxLength": 320},
        "The sender (`Name <address>`) must contain this, any case.",
    ),
    _query(
        "to",
        {"type": "string", "maxLength": 320},
        "An envelope recipient as received (`RCPT TO`; any of them, for sandbox mail captured "
        "with SMTP credentials) must be this address: the local part "
        "exactly, plus tag included (`signup+run4711@…` matches only mail sent to that tag, "
        "`signup@…` only mail without one), the domain in any case.",
    ),
    _query(
        "header",
        {"type": "array", "items": {"type": "string", "maxLength": 1000}, "maxItems": 20},
        "`Name: value`, repeatable: the email must have a header of that name (any case) whose "
        "value is exactly this (surrounding blanks aside). Every `header` given must match.",
        style="form",
        explode=True,
    ),
    _query(
        "label",
        {"type": "string", "maxLength": 63},
        "A label key the email must carry. It counts once the label is applied: a classifier's "
        "label that arrives after the email (`email.labeled`), or one set by hand "
        "(`email.updated`), releases the wait then. A key the workspace has no label for is "
        "400 `unknown_label`.",
    ),
    _query(
        "has_code",
        {"type": "boolean"},
        "true: only mail in which a verification code was found (`extracted.code`); false: only "
        "mail without one.",
    ),
    _query(
        "has_link",
        {"type": "boolean"},
        "true: only mail with a link found (`extracted.links`); false: only mail without.",
    ),
    _query(
        "link_kind",
        {"enum": list(LinkOut().fields["kind"].choices)},
        "Only mail with a link of this kind (with `has_link=false`: a validation_error).",
    ),
    _query(
        "subject",
        {"type": "string", "maxLength": 500},
        "Case-insensitive regular expression (Python syntax) the subject must match. "
        + PATTERN_BOUNDS,
    ),
    _query(
        "body",
        {"type": "string", "maxLength": 500},
        "Case-insensitive regular expression (Python syntax) the text body must match (the "
        "HTML body rendered to text when there is no text part). " + PATTERN_BOUNDS,
    ),
    _query(
        "nth",
        {"type": "integer", "minimum": 1, "maximum": 100, "default": 1},
        "Answer with the nth matching email received since `since` (oldest first): `nth=3` "
        "waits for the third.",
    ),
]

WAIT_SLOTS = (
    "The request holds no thread and no database connection while it waits. Open waits and "
    "streams (and outbox `?wait=` requests) of one key or session count together against "
    "`MAX_OPEN_STREAMS_PER_KEY`; beyond it, 429 `rate_limited` with `Retry-After`."
)
EMAIL_LINKS = {
    "GetEmail": link("getEmail", "The email.", email_id="$response.body#/id"),
    "UpdateEmail": link("updateEmail", "Mark or label it.", email_id="$response.body#/id"),
}


def add_streaming_paths(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict:
    paths = result.setdefault("paths", {})
    paths["/api/v1/inboxes/{inbox_id}/wait"] = {
        "get": {
            "operationId": "waitForEmail",
            "summary": "Wait for an email",
            "tags": ["Emails"],
            "description": (
                "Long-poll: returns the oldest email received at or after `since` that matches "
                "every filter given (the `nth` such email with `nth`) — at once if it is already "
                "there, else the moment it is stored or labeled — or 204 with no body when "
                "`timeout` passes. " + WAIT_SLOTS + "\n\nRequired scope: `read`."
            ),
            "parameters": [INBOX_ID, *WAIT_FILTERS],
            "security": _security(),
            "x-required-scope": "read",
            "responses": {
                "200": {
                    "description": "The full email record.",
                    "content": {
                        "application/json": {"schema": {"$ref": "#/components/schemas/EmailOut"}}
                    },
                    "links": EMAIL_LINKS,
                },
                "204": {"description": "Nothing matched before the timeout."},
                # Up to 20 header filters of 1,000 characters each, beside subject and body
                # patterns, can make a request line longer than the web server takes.
                **_errors((400, "unknown_label"), (414, "uri_too_long")),
            },
        }
    }
    paths["/api/v1/emails/wait"] = {
        "get": {
            "operationId": "waitForEmails",
            "summary": "Wait for emails across the workspace",
            "tags": ["Emails"],
            "description": (
                "Long-poll over every inbox of the workspace (or `inbox`): returns the `count` "
                "emails from the `nth` match on (oldest first) once that many emails received "
                "at or after `since` match every filter given, or 204 with no body when "
                "`timeout` passes. Catch-all and plus-addressed mail is found by `to` without "
                "knowing which inbox received it. " + WAIT_SLOTS + "\n\nRequired scope: `read`."
            ),
            "parameters": [
                _query(
                    "inbox",
                    {"type": "string", "maxLength": 320},
                    "Only this inbox (id or address; one of another workspace is 404 "
                    "`not_found`). Omitted: every inbox of the workspace.",
                ),
                _query(
                    "count",
                    {"type": "integer", "minimum": 1, "maximum": 100, "default": 1},
                    "How many matching emails to wait for.",
                ),
                *WAIT_FILTERS,
            ],
            "security": _security(),
            "x-required-scope": "read",
            "responses": {
                "200": {
                    "description": "`data`: the full records of the matching emails, oldest first.",
                    "content": {
                        "application/json": {
                            "schema": {
                                "type": "object",
                                "required": ["data"],
                                "properties": {
                                    "data": {
                                        "type": "array",
                                        "items": {"$ref": "#/components/schemas/EmailOut"},
                                    }
                                },
                            }
                        }
                    },
                },
                "204": {"description": "Fewer than `count` emails matched before the timeout."},
                # Up to 20 header filters of 1,000 characters each, beside subject and body
                # patterns, can make a request line longer than the web server takes.
                **_errors((400, "unknown_label"), (414, "uri_too_long")),
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

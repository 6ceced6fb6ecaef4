"""OpenAPI for what this service sends, not serves: the OpenAPI 3.1 top-level ``webhooks``
section, one entry per event type, with the signed request's headers and its JSON body.

drf-spectacular documents views only, so a postprocessing hook (:func:`add_webhooks`) writes
the section and the payload components. The payloads are built in ``webhooks.services``
(envelope), ``mail.pipeline`` (email events), ``inboxes.services`` (inbox events) and
``outbox.services`` (``outbound.*``, whose item is the API's ``OutboxOut``); the schemas are
strict (every field required, no others), and tests/webhooks/test_openapi_webhooks.py validates
the bodies a real receiver gets against them, so a payload that changes without its schema
fails there.
"""

from __future__ import annotations

from typing import Any

from webhooks.services import TEST_EVENT, WEBHOOK_EVENTS


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _object(properties: dict[str, Any], description: str = "") -> dict[str, Any]:
    schema: dict[str, Any] = {
        "type": "object",
        "required": list(properties),
        "additionalProperties": False,
        "properties": properties,
    }
    if description:
        schema["description"] = description
    return schema


_NULLABLE_STRING = {"type": ["string", "null"]}
_TIMESTAMP = {"type": "string", "format": "date-time", "description": "ISO 8601, UTC."}

_REASON = {"type": "string", "description": "Why, in words (empty when it passed)."}

COMPONENTS: dict[str, dict[str, Any]] = {
    "WebhookAuthentication": _object(
        {
            "spf": _object(
                {
                    "result": {
                        "enum": [
                            "pass",
                            "fail",
                            "softfail",
                            "neutral",
                            "none",
                            "temperror",
                            "permerror",
                        ]
                    },
                    "domain": {"type": "string"},
                    "identity": {"enum": ["mailfrom", "helo"]},
                    "client_ip": {"type": "string"},
                    "reason": _REASON,
                }
            ),
            "dkim": {
                "type": "array",
                "description": "One per DKIM-Signature, topmost first; empty: unsigned.",
                "items": _object(
                    {
                        "result": {"enum": ["pass", "fail", "neutral", "temperror", "permerror"]},
                        "domain": {"type": "string"},
                        "selector": {"type": "string"},
                        "reason": _REASON,
                    }
                ),
            },
            "dmarc": _object(
                {
                    "result": {"enum": ["pass", "fail", "none", "temperror", "permerror"]},
                    "domain": {"type": "string"},
                    "policy": {"enum": ["none", "quarantine", "reject", None]},
                    "alignment": {"type": "array", "items": {"enum": ["dkim", "spf"]}},
                    "reason": _REASON,
                }
            ),
            "arc": _object(
                {
                    "result": {"enum": ["pass", "fail", "none", "neutral", "temperror"]},
                    "domain": {"type": "string"},
                    "instances": {"type": "integer", "minimum": 0},
                    "reason": _REASON,
                }
            ),
        },
        "SPF, DKIM, DMARC and ARC verdicts (as `authentication` in GET /emails/{id}).",
    ),
    "WebhookInbox": _object(
        {
            "id": {"type": "string", "pattern": "^inb_"},
            "address": {"type": "string", "description": "The inbox's full address."},
        },
        "The inbox the event is about.",
    ),
    "WebhookLabel": _object(
        {
            "key": {"type": "string"},
            "source": {"enum": ["rule", "classifier", "manual"]},
            "confidence": {"type": "number", "minimum": 0, "maximum": 1},
        },
        "A label on the email: its key, what applied it, and how sure that was (1 for rules).",
    ),
    "WebhookEmail": _object(
        {
            "id": {"type": "string", "pattern": "^eml_"},
            "from": _object(
                {
                    "address": {"type": "string"},
                    "name": {"type": "string"},
                },
                "The sender (empty strings when the message has no parseable From).",
            ),
            "subject": {"type": "string"},
            "snippet": {
                "type": "string",
                "description": "The preview: the text (or HTML rendered as text) with white "
                "space folded, its first 200 characters.",
            },
            "labels": {"type": "array", "items": _ref("WebhookLabel")},
            "verification": _object(
                {
                    "code": {
                        **_NULLABLE_STRING,
                        "description": "The primary verification code, if any.",
                    },
                    "link": {**_NULLABLE_STRING, "description": "The primary link, if any."},
                },
                "What extraction found (the full `extracted` object is in GET /emails/{id}).",
            ),
            "received_at": _TIMESTAMP,
            "authentication": {
                "oneOf": [_ref("WebhookAuthentication"), {"type": "null"}],
                "description": "The SPF, DKIM, DMARC and ARC verdicts, checked before the email "
                "was stored; null when not checked (MAIL_AUTH_CHECKS off, or not received over "
                "SMTP).",
            },
        },
        "A summary of the email; fetch the full record with GET /emails/{id}.",
    ),
}

# (event, summary, description, data schema)
_EVENTS: list[tuple[str, str, str, dict[str, Any]]] = [
    (
        "email.received",
        "An email was received",
        "A message was stored and processed: extraction, rules and the classifier ran (within "
        "its time limit), so `labels` holds what applied by then.",
        _object({"inbox": _ref("WebhookInbox"), "email": _ref("WebhookEmail")}),
    ),
    (
        "email.labeled",
        "Labels were applied to an email",
        "Rules or the classifier applied labels: at receipt (right after `email.received`) or "
        "later, when a classifier answered after its time limit. `labels` holds the labels "
        "just applied; `email.labels` all of the email's labels.",
        _object(
            {
                "inbox": _ref("WebhookInbox"),
                "email": _ref("WebhookEmail"),
                "labels": {"type": "array", "items": _ref("WebhookLabel")},
            }
        ),
    ),
    (
        "inbox.created",
        "An inbox was created",
        "An inbox was created through the API, the dashboard, agent tooling, or by catch-all "
        "mail to an unknown address of a catch-all custom domain.",
        _object(
            {
                "inbox": _ref("WebhookInbox"),
                "source": {"enum": ["api", "dashboard", "catch_all", "agent"]},
            }
        ),
    ),
    (
        "inbox.expired",
        "A disposable inbox expired",
        "A disposable inbox reached its expiry and stopped accepting mail. Sent once per "
        "expiry (extending the inbox and letting it expire again sends it again).",
        _object({"inbox": _ref("WebhookInbox"), "expired_at": _TIMESTAMP}),
    ),
    (
        "inbox.deleted",
        "An inbox was deleted with its mail",
        "The inbox and all its mail are gone. `reason`: `request` (DELETE /inboxes/{id}, the "
        "dashboard or an agent's tool) or `retention` (it had expired, and its workspace's "
        "`expired_inbox_grace_hours` ran out). Its id answers not_found from now on.",
        _object(
            {
                "inbox": _ref("WebhookInbox"),
                "reason": {"enum": ["request", "retention"]},
            }
        ),
    ),
    *[
        (
            event,
            summary,
            description + " `outbound` is the outbox item as GET /outbox/{id} answers it.",
            _object({"outbound": _ref("OutboxOut"), "inbox": _ref("WebhookInbox")}),
        )
        for event, summary, description in [
            (
                "outbound.pending",
                "An outgoing email waits for approval",
                "A send (or a forwarded copy) needs a person's approval: status `pending`.",
            ),
            (
                "outbound.sent",
                "An outgoing email was sent",
                "An outgoing email was handed to delivery (directly, or after approval).",
            ),
            (
                "outbound.rejected",
                "An outgoing email was rejected",
                "An owner or admin rejected a pending outgoing email.",
            ),
            (
                "outbound.failed",
                "An outgoing email failed for good",
                "Delivery of a sent email failed permanently (or its retries ran out); the "
                "reason is in `outbound.error`.",
            ),
        ]
    ],
    (
        TEST_EVENT,
        "A test event",
        "Sent by POST /webhooks/{id}/test to that endpoint only, whatever its `events`.",
        _object(
            {
                "endpoint": _object(
                    {"id": {"type": "string", "pattern": "^whk_"}, "url": {"type": "string"}}
                ),
                "message": {"type": "string"},
            }
        ),
    ),
]

_SIGNATURE_TEXT = (
    "`t=<unix seconds>,v1=<hex>`: `v1` is the lowercase hex HMAC-SHA256, keyed with the "
    "endpoint's signing secret (`whsec_…`, in the create response only), of `<t>.<raw body>`. "
    "Compare in constant time over the raw body as received, and reject a `t` 300 seconds or "
    "more away from now."
)

_DELIVERY_TEXT = (
    "Each request is a `POST` of a JSON body, signed (`Service-Signature`). Answer with any "
    "2xx within 10 seconds; anything else, a redirect included, or no answer in time, is a "
    "failed attempt, retried at about 10 s, 40 s, 3 min, 11 min and 43 min, after which the "
    "delivery is `failed` (see GET /webhooks/{id}/deliveries; any delivery can be replayed). "
    "Delivery is at least once: deduplicate on `Service-Delivery`, which a retry or replay "
    "keeps."
)


def _payload_name(event: str) -> str:
    return "".join(part.capitalize() for part in event.replace("_", ".").split(".")) + "Webhook"


def _headers(event: str) -> list[dict[str, Any]]:
    return [
        {
            "in": "header",
            "name": "Service-Event",
            "required": True,
            "schema": {"type": "string", "const": event},
            "description": "The event type (as the body's `type`).",
        },
        {
            "in": "header",
            "name": "Service-Delivery",
            "required": True,
            "schema": {"type": "string", "pattern": "^dlv_[0-9A-Za-z]+$"},
            "description": "The delivery id (as the body's `id`): the same on every retry "
            "and replay; receivers deduplicate on it.",
        },
        {
            "in": "header",
            "name": "Service-Signature",
            "required": True,
            "schema": {"type": "string", "pattern": "^t=[0-9]+,v1=[0-9a-f]{64}$"},
            "description": _SIGNATURE_TEXT,
        },
    ]


def webhook_events() -> list[str]:
    """Every event type the ``webhooks`` section describes, in the order it lists them."""
    return [event for event, *_ in _EVENTS]


def add_webhooks(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict:
    """drf-spectacular postprocessing hook: the ``webhooks`` section and its components."""
    assert set(webhook_events()) == {*WEBHOOK_EVENTS, TEST_EVENT}, "an event lacks its schema"
    schemas = result.setdefault("components", {}).setdefault("schemas", {})
    schemas.update(COMPONENTS)
    webhooks: dict[str, Any] = {}
    for event, summary, description, data in _EVENTS:
        name = _payload_name(event)
        schemas[name] = _object(
            {
                "id": {"type": "string", "pattern": "^dlv_", "description": "The delivery id."},
                "type": {"type": "string", "const": event},
                "created_at": {
                    **_TIMESTAMP,
                    "description": "When the delivery was made (ISO 8601, UTC).",
                },
                "data": data,
            },
            f"The body of a `{event}` webhook request.",
        )
        webhooks[event] = {
            "post": {
                "operationId": _payload_name(event)[:1].lower() + _payload_name(event)[1:],
                "summary": summary,
                "description": f"{description}\n\n{_DELIVERY_TEXT}",
                "tags": ["Webhooks"],
                "parameters": _headers(event),
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": _ref(name)}},
                },
                "responses": {
                    "2XX": {"description": "Received: any 2xx answer ends the delivery."},
                    "default": {"description": "Anything else is a failed attempt, retried."},
                },
            }
        }
    result["webhooks"] = webhooks
    return result

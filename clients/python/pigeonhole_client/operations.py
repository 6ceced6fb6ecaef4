"""Every HTTP operation the client calls, declared as data.

The resources never build a URL or a query of their own: they name an :class:`Operation` of
:data:`OPERATIONS` and the transport checks the path parameters, query parameters, headers and
body fields against it before sending. So this table is the whole surface the client uses, and
the contract test (``tests/client/test_contract.py`` in the server's repository) compares it,
entry by entry, with the server's OpenAPI document.
"""

from __future__ import annotations

import string
from dataclasses import dataclass


@dataclass(frozen=True)
class Operation:
    """One API operation: ``method`` and ``path`` (a template under ``/api/v1``), the query
    parameters, headers and JSON body fields the client may send, and the name of the schema
    component the success response is (None: no JSON body, or one the client does not model)."""

    name: str
    method: str
    path: str
    query: frozenset[str] = frozenset()
    headers: frozenset[str] = frozenset()
    body: frozenset[str] | None = None  # None: the operation takes no body
    response: str | None = None
    # Safe to send again after a dropped connection: reads, deletes, and sends that carry an
    # Idempotency-Key (the transport adds it).
    idempotent: bool = False

    @property
    def path_params(self) -> list[str]:
        return [name for _, name, _, _ in string.Formatter().parse(self.path) if name]


def _op(
    name: str,
    method: str,
    path: str,
    *,
    query: tuple[str, ...] = (),
    headers: tuple[str, ...] = (),
    body: tuple[str, ...] | None = None,
    response: str | None = None,
) -> Operation:
    return Operation(
        name=name,
        method=method,
        path=path,
        query=frozenset(query),
        headers=frozenset(headers),
        body=None if body is None else frozenset(body),
        response=response,
        idempotent=method in {"GET", "HEAD", "DELETE"} or "Idempotency-Key" in headers,
    )


_INBOX_FIELDS = (
    "name",
    "ttl_minutes",
    "agent_name",
    "tags",
    "max_emails",
    "overflow",
    "allow_senders",
    "block_senders",
    "forward_to",
)
_EMAIL_QUERY = ("q", "label", "unread", "since", "limit", "cursor")

OPERATIONS: dict[str, Operation] = {
    op.name: op
    for op in (
        # inboxes
        _op(
            "inboxes.list",
            "GET",
            "/inboxes",
            query=("q", "tag", "agent", "include_expired", "limit", "cursor"),
            response="InboxPageOut",
        ),
        _op(
            "inboxes.create",
            "POST",
            "/inboxes",
            body=(*_INBOX_FIELDS, "local_part", "domain"),
            response="InboxOut",
        ),
        _op("inboxes.get", "GET", "/inboxes/{inbox_id}", response="InboxOut"),
        _op(
            "inboxes.update",
            "PATCH",
            "/inboxes/{inbox_id}",
            body=(*_INBOX_FIELDS, "extend_minutes"),
            response="InboxOut",
        ),
        _op("inboxes.delete", "DELETE", "/inboxes/{inbox_id}", response="DeletedOut"),
        _op(
            "inboxes.wait",
            "GET",
            "/inboxes/{inbox_id}/wait",
            query=("timeout", "from", "subject", "since"),
            response="EmailOut",
        ),
        _op(
            "inboxes.stream",
            "GET",
            "/inboxes/{inbox_id}/stream",
            query=("last_event_id", "timeout"),
            headers=("Last-Event-ID",),
        ),
        # emails
        _op(
            "emails.list",
            "GET",
            "/inboxes/{inbox_id}/emails",
            query=_EMAIL_QUERY,
            response="EmailSummaryPageOut",
        ),
        _op(
            "emails.search",
            "GET",
            "/emails",
            query=(*_EMAIL_QUERY, "inbox"),
            response="EmailSummaryPageOut",
        ),
        _op("emails.get", "GET", "/emails/{email_id}", query=("mark_read",), response="EmailOut"),
        _op(
            "emails.update",
            "PATCH",
            "/emails/{email_id}",
            body=("read", "starred", "labels", "remove_labels"),
            response="EmailOut",
        ),
        _op("emails.delete", "DELETE", "/emails/{email_id}", response="DeletedOut"),
        _op("emails.raw", "GET", "/emails/{email_id}/raw"),
        _op("emails.attachment", "GET", "/emails/{email_id}/attachments/{attachment_id}"),
        # outbox
        _op(
            "outbox.send",
            "POST",
            "/inboxes/{inbox_id}/send",
            query=("wait",),
            headers=("Idempotency-Key",),
            body=("to", "cc", "subject", "text", "html", "in_reply_to", "reason"),
            response="OutboxOut",
        ),
        _op("outbox.get", "GET", "/outbox/{item_id}", query=("wait",), response="OutboxOut"),
        _op(
            "outbox.list",
            "GET",
            "/outbox",
            query=("status", "delivery", "limit", "cursor"),
            response="OutboxPageOut",
        ),
        # labels
        _op("labels.list", "GET", "/labels", query=("limit", "cursor"), response="LabelPageOut"),
        _op(
            "labels.create",
            "POST",
            "/labels",
            body=("key", "name", "color", "instructions", "threshold", "rules", "enabled"),
            response="LabelOut",
        ),
        _op(
            "labels.update",
            "PATCH",
            "/labels/{key}",
            body=("name", "color", "instructions", "threshold", "rules", "enabled"),
            response="LabelOut",
        ),
        _op("labels.delete", "DELETE", "/labels/{key}", response="LabelDeletedOut"),
        _op(
            "labels.test",
            "POST",
            "/labels/test",
            body=("from", "subject", "text", "email_id", "label"),
            response="LabelTestOut",
        ),
        # webhooks
        _op(
            "webhooks.list",
            "GET",
            "/webhooks",
            query=("limit", "cursor"),
            response="EndpointPageOut",
        ),
        _op(
            "webhooks.create",
            "POST",
            "/webhooks",
            body=("url", "events", "inbox_ids", "label_keys", "enabled"),
            response="EndpointCreatedOut",
        ),
        _op(
            "webhooks.update",
            "PATCH",
            "/webhooks/{endpoint_id}",
            body=("url", "events", "inbox_ids", "label_keys", "enabled"),
            response="EndpointOut",
        ),
        _op("webhooks.delete", "DELETE", "/webhooks/{endpoint_id}", response="DeletedOut"),
        _op(
            "webhooks.deliveries",
            "GET",
            "/webhooks/{endpoint_id}/deliveries",
            query=("limit", "cursor"),
            response="DeliveryPageOut",
        ),
        _op(
            "webhooks.replay",
            "POST",
            "/webhooks/{endpoint_id}/deliveries/{delivery_id}/replay",
            response="DeliveryOut",
        ),
        _op("webhooks.test", "POST", "/webhooks/{endpoint_id}/test", response="DeliveryOut"),
        # keys
        _op("keys.list", "GET", "/keys", query=("limit", "cursor"), response="KeyPageOut"),
        _op(
            "keys.create",
            "POST",
            "/keys",
            body=("name", "kind", "scopes", "expires_in_days", "require_approval"),
            response="KeyCreatedOut",
        ),
        _op(
            "keys.update", "PATCH", "/keys/{key_id}", body=("require_approval",), response="KeyOut"
        ),
        _op("keys.delete", "DELETE", "/keys/{key_id}", response="DeletedOut"),
        # the workspace
        _op("stats", "GET", "/stats", response="StatsOut"),
        _op("me", "GET", "/me", response="MeOut"),
        _op("domains", "GET", "/domains", response="DomainPageOut"),
    )
}

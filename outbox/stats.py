"""GET /stats and the dashboard's overview: usage, activity and recent events of a workspace.

It summarises every resource app (inboxes, mail, the outbox, webhook deliveries and the event
log), each counted by its own app's selectors, so it lives in the app above all of them: outbox
imports mail, inboxes, webhooks and events, and nothing imports outbox (docs/architecture.md).
Every count reads an index or a maintained counter, never a scan: email totals, unread counts and
bytes stored come from the inboxes' counters, the last-24-hours count from ``(workspace,
received_at)``, recent events from the log's ``(workspace_id, -id)``.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.utils import timezone

from apikeys.models import Workspace
from events import selectors as event_selectors
from inboxes import selectors as inbox_selectors
from mail import selectors as mail_selectors
from outbox import selectors as outbox_selectors
from webhooks import selectors as webhook_selectors

RECENT_EVENTS = 20


def workspace_stats(workspace: Workspace) -> dict[str, Any]:
    """The /stats body for one workspace."""
    now = timezone.now()
    inboxes = inbox_selectors.inbox_counts(workspace, now)
    day_ago = now - timedelta(hours=24)
    return {
        "inboxes": {
            "total": inboxes["total"],
            "active": inboxes["total"] - inboxes["expired"],
            "expired": inboxes["expired"],
        },
        "emails": {
            "total": inboxes["emails"],
            "last_24h": mail_selectors.email_count_since(workspace, day_ago),
            "unread": inboxes["unread"],
        },
        "outbox": outbox_selectors.outbox_status_counts(workspace),
        "outbox_delivery": outbox_selectors.outbox_delivery_counts(workspace),
        "webhooks": webhook_selectors.delivery_counts_since(workspace, day_ago),
        "storage": {
            "bytes": inboxes["stored_bytes"],
            "largest_inboxes": [
                {
                    "id": inbox.pk,
                    "address": inbox.address,
                    "bytes": inbox.stored_bytes,
                    "email_count": inbox.email_count,
                }
                for inbox in inbox_selectors.storage_largest(workspace)
            ],
        },
        "recent_events": [
            {
                "id": event.pk,
                "type": event.type,
                "inbox_id": event.inbox_id or None,
                "created_at": event.created_at,
                "data": event.data,
            }
            for event in event_selectors.event_recent(workspace.pk, RECENT_EVENTS)
        ],
    }


def existing_ids(workspace: Workspace, *, inbox_ids: set[str], email_ids: set[str]) -> set[str]:
    """Which of these inbox and email ids still exist in the workspace (two primary-key
    lookups), so the overview links only to what can be opened."""
    found = inbox_selectors.inbox_ids_existing(workspace, inbox_ids)
    return found | mail_selectors.email_ids_existing(workspace, email_ids)

"""GET /stats: usage, activity and recent events of a workspace, cheap at any size.

Email totals and unread counts come from the inboxes' maintained counters (no scan of emails);
the last-24-hours count uses the ``(workspace, received_at)`` index; recent events read the log's
``(workspace_id, -id)`` index.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.apps import apps
from django.db.models import Count, Q, Sum
from django.utils import timezone

from apikeys.models import Workspace
from inboxes.models import Inbox
from mail.models import Email
from webhooks.models import Delivery, Event

RECENT_EVENTS = 20
OUTBOX_STATUSES = ("pending", "sent", "rejected", "failed", "expired")


def _outbox_counts(workspace: Workspace) -> dict[str, int]:
    # By string reference: the outbox app imports mail, not the other way round.
    OutboxItem = apps.get_model("outbox", "OutboxItem")
    counts = dict.fromkeys(OUTBOX_STATUSES, 0)
    for status, count in (
        OutboxItem.objects.filter(workspace=workspace).values_list("status").annotate(n=Count("pk"))
    ):
        counts[status] = count
    return counts


def workspace_stats(workspace: Workspace) -> dict[str, Any]:
    """The /stats body for one workspace."""
    now = timezone.now()
    expired = Q(expires_at__isnull=False, expires_at__lte=now)
    inboxes = Inbox.objects.filter(workspace=workspace).aggregate(
        total=Count("pk"),
        expired=Count("pk", filter=expired),
        emails=Sum("email_count"),
        unread=Sum("unread_count"),
    )
    last_24h = Email.objects.filter(
        workspace=workspace, received_at__gte=now - timedelta(hours=24)
    ).count()
    recent = Event.objects.filter(workspace_id=workspace.pk).order_by("-id")[:RECENT_EVENTS]
    return {
        "inboxes": {
            "total": inboxes["total"],
            "active": inboxes["total"] - inboxes["expired"],
            "expired": inboxes["expired"],
        },
        "emails": {
            "total": inboxes["emails"] or 0,
            "last_24h": last_24h,
            "unread": inboxes["unread"] or 0,
        },
        "outbox": _outbox_counts(workspace),
        "webhooks": Delivery.objects.filter(
            workspace_id=workspace.pk, created_at__gte=now - timedelta(hours=24)
        ).aggregate(deliveries_24h=Count("pk"), failed_24h=Count("pk", filter=Q(status="failed"))),
        "recent_events": [
            {
                "id": event.pk,
                "type": event.type,
                "inbox_id": event.inbox_id or None,
                "created_at": event.created_at,
                "data": event.data,
            }
            for event in recent
        ],
    }

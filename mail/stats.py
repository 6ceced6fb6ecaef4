"""GET /stats: usage, activity and recent events of a workspace, cheap at any size.

Email totals and unread counts come from the inboxes' maintained counters (no scan of emails);
the last-24-hours count uses the ``(workspace, received_at)`` index; recent events read the log's
``(workspace_id, -id)`` index.

The dashboard's overview draws its charts from the same module: mail per hour over the last days
(one grouped range query on the ``(workspace, received_at)`` index, never a scan of all mail),
webhook deliveries of the last day by status (the ``(workspace_id, created_at)`` index) and the
outbox by status (the ``(workspace, status, -id)`` index).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.apps import apps
from django.db.models import Count, Q, Sum
from django.db.models.functions import TruncHour
from django.utils import timezone

from apikeys.models import Workspace
from inboxes.models import Inbox
from mail.models import Email
from webhooks.models import Delivery, Event

RECENT_EVENTS = 20
OUTBOX_STATUSES = ("pending", "sent", "rejected", "failed", "expired")
DELIVERY_STATUSES = ("succeeded", "failed", "retrying", "pending")


def _outbox_counts(workspace: Workspace) -> dict[str, int]:
    # By string reference: the outbox app imports mail, not the other way round.
    OutboxItem = apps.get_model("outbox", "OutboxItem")
    counts = dict.fromkeys(OUTBOX_STATUSES, 0)
    for status, count in (
        OutboxItem.objects.filter(workspace=workspace).values_list("status").annotate(n=Count("pk"))
    ):
        counts[status] = count
    return counts


# Where sent mail is on its way (the outbox's ``delivery.state``), by stored value.
OUTBOX_DELIVERY_STATES = {
    "queued": "queued",
    "retrying": "retrying",
    "delivered": "done",
    "internal": "internal",
    "captured": "captured",
    "failed": "failed",
}


def _outbox_delivery_counts(workspace: Workspace) -> dict[str, int]:
    """Deliveries, not hand-overs: sent items by what became of them."""
    OutboxItem = apps.get_model("outbox", "OutboxItem")
    by_value = dict(
        OutboxItem.objects.filter(workspace=workspace)
        .exclude(delivery="waiting")
        .values_list("delivery")
        .annotate(n=Count("pk"))
    )
    return {state: by_value.get(value, 0) for state, value in OUTBOX_DELIVERY_STATES.items()}


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
        "outbox_delivery": _outbox_delivery_counts(workspace),
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


def hourly_received(
    workspace: Workspace, hours: int = 72, now: datetime | None = None
) -> list[tuple[datetime, int]]:
    """Mail received per UTC hour, oldest first, ``hours`` buckets ending with the current hour
    (hours without mail included as 0). One grouped range query on ``(workspace, received_at)``;
    ``COUNT(*)`` keeps it an index-only scan."""
    now = now or timezone.now()
    current = now.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
    start = current - timedelta(hours=hours - 1)
    counts = {
        row["hour"]: row["n"]
        for row in Email.objects.filter(
            workspace=workspace,
            received_at__gte=start,
            received_at__lt=current + timedelta(hours=1),
        )
        .annotate(hour=TruncHour("received_at", tzinfo=UTC))
        .values("hour")
        .annotate(n=Count("*"))
        .order_by()
    }
    buckets = [start + timedelta(hours=i) for i in range(hours)]
    return [(hour, counts.get(hour, 0)) for hour in buckets]


@dataclass(frozen=True)
class WebhookHealth:
    """Deliveries created in the window, by status, and the share that succeeded of those
    attempted so far (``pending`` ones have not been tried yet; ``retrying`` ones have failed at
    least once); ``rate`` is None when nothing was attempted."""

    by_status: dict[str, int]
    total: int
    attempted: int
    rate: float | None


def webhook_health(
    workspace: Workspace, hours: int = 24, now: datetime | None = None
) -> WebhookHealth:
    """Webhook deliveries of the last ``hours`` by status, with the success rate."""
    since = (now or timezone.now()) - timedelta(hours=hours)
    by_status = dict.fromkeys(DELIVERY_STATUSES, 0)
    for status, count in (
        Delivery.objects.filter(workspace_id=workspace.pk, created_at__gte=since)
        .values_list("status")
        .annotate(n=Count("*"))
        .order_by()
    ):
        by_status[status] = count
    total = sum(by_status.values())
    attempted = total - by_status["pending"]
    rate = by_status["succeeded"] / attempted if attempted else None
    return WebhookHealth(by_status=by_status, total=total, attempted=attempted, rate=rate)


def existing_ids(workspace: Workspace, *, inbox_ids: set[str], email_ids: set[str]) -> set[str]:
    """Which of these inbox and email ids still exist in the workspace (two primary-key
    lookups), so the overview links only to what can be opened."""
    found: set[str] = set()
    if inbox_ids:
        found.update(
            Inbox.objects.filter(workspace=workspace, pk__in=inbox_ids).values_list("pk", flat=True)
        )
    if email_ids:
        found.update(
            Email.objects.filter(workspace=workspace, pk__in=email_ids).values_list("pk", flat=True)
        )
    return found


def latest_inbox(workspace: Workspace) -> Inbox | None:
    """The workspace's newest active inbox, to name an address in the overview's empty state."""
    now = timezone.now()
    return (
        Inbox.objects.filter(workspace=workspace)
        .filter(Q(expires_at__isnull=True) | Q(expires_at__gt=now))
        .order_by("-id")
        .first()
    )

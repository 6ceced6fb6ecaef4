"""Reads of outbox items, scoped to a workspace."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import Count, DateTimeField, ExpressionWrapper, F, QuerySet
from django.db.models.functions import Coalesce

from apikeys.models import Workspace
from config.api.timestamps import iso
from outbox.exceptions import OutboxNotFound
from outbox.models import DELIVERY_STATE, DeliveryState, OutboxItem, Status
from outbox.parts import OutgoingParts, outgoing_parts

DELIVERY_BY_STATE = {name: value for value, name in DELIVERY_STATE.items()}


def delivery_record(item: OutboxItem) -> dict[str, Any]:
    """Where the message is on its way: the state, every attempt, the next one, the reply."""
    return {
        "state": DELIVERY_STATE.get(item.delivery, item.delivery),
        "attempts": list(item.attempt_log or []),
        "next_attempt_at": (
            iso(item.next_attempt_at)
            if item.delivery in (DeliveryState.QUEUED, DeliveryState.RETRYING)
            else None
        ),
        "reply": item.relay_reply or None,
        "delivered_at": iso(item.delivered_at),
    }


def outbox_list(
    workspace: Workspace, *, status: str | None = None, delivery: str | None = None
) -> QuerySet[OutboxItem]:
    """The workspace's items, newest first unless ordered otherwise; ``delivery`` is an API
    state name (``delivered``, ``captured`` …)."""
    queryset = OutboxItem.objects.filter(workspace=workspace).defer("raw")
    if status:
        queryset = queryset.filter(status=status)
    if delivery:
        queryset = queryset.filter(delivery=DELIVERY_BY_STATE[delivery])
    return queryset


def outbox_outgoing(workspace: Workspace, *, delivery: str | None = None) -> QuerySet[OutboxItem]:
    """Every item of the workspace for the outgoing-mail page, newest first."""
    return (
        outbox_list(workspace, delivery=delivery)
        .select_related("inbox", "key", "decided_by")
        .order_by("-created_at", "-id")
    )


def outbox_parts(item: OutboxItem) -> OutgoingParts:
    """What the item sends, read from its stored message (the bytes the relay gets)."""
    raw = OutboxItem.objects.filter(workspace_id=item.workspace_id, pk=item.pk).values_list(
        "raw", flat=True
    )
    return outgoing_parts(bytes(raw.first() or b""))


def outbox_get(workspace: Workspace, item_id: str) -> OutboxItem:
    item = OutboxItem.objects.filter(workspace=workspace, pk=item_id).defer("raw").first()
    if item is None:
        raise OutboxNotFound()
    return item


def outbox_pending_count(workspace: Workspace) -> int:
    """How many of the workspace's outgoing messages wait for a decision (the nav badge)."""
    return OutboxItem.objects.filter(workspace=workspace, status=Status.PENDING).count()


def outbox_expires_at(item: OutboxItem) -> datetime:
    """When a pending item expires unless someone decides (``OUTBOX_APPROVAL_HOURS``)."""
    return item.created_at + timedelta(hours=settings.OUTBOX_APPROVAL_HOURS)


def outbox_approval_queue(workspace: Workspace) -> QuerySet[OutboxItem]:
    """Pending items waiting for a person, oldest (soonest to expire) first, with ``expires_at``."""
    window = timedelta(hours=settings.OUTBOX_APPROVAL_HOURS)
    return (
        OutboxItem.objects.filter(workspace=workspace, status=Status.PENDING)
        .select_related("inbox", "key")
        .defer("raw")
        .annotate(
            expires_at=ExpressionWrapper(F("created_at") + window, output_field=DateTimeField())
        )
        .order_by("created_at", "id")
    )


def outbox_approval_history(
    workspace: Workspace, *, status: str | None = None
) -> QuerySet[OutboxItem]:
    """Items that needed approval and are no longer pending, most recently closed first.

    ``closed_at`` is when the decision was made, or for an item nobody decided, when it
    expired (its creation plus ``OUTBOX_APPROVAL_HOURS``).
    """
    window = timedelta(hours=settings.OUTBOX_APPROVAL_HOURS)
    queryset = (
        OutboxItem.objects.filter(workspace=workspace, approval_required=True)
        .exclude(status=Status.PENDING)
        .select_related("inbox", "key", "decided_by")
        .defer("raw")
        .annotate(
            closed_at=Coalesce(
                "decided_at",
                ExpressionWrapper(F("created_at") + window, output_field=DateTimeField()),
            )
        )
        .order_by("-closed_at", "-id")
    )
    if status:
        queryset = queryset.filter(status=status)
    return queryset


STATUS_COUNTED = ("pending", "sent", "rejected", "failed", "expired")
# Where sent mail is on its way (``delivery.state``), by stored value.
DELIVERY_COUNTED = {
    "queued": "queued",
    "retrying": "retrying",
    "delivered": "done",
    "internal": "internal",
    "captured": "captured",
    "failed": "failed",
}


def outbox_status_counts(workspace: Workspace) -> dict[str, int]:
    """Outbox items by status (the ``(workspace, status, -id)`` index)."""
    counts = dict.fromkeys(STATUS_COUNTED, 0)
    for status, count in (
        OutboxItem.objects.filter(workspace=workspace).values_list("status").annotate(n=Count("pk"))
    ):
        counts[status] = count
    return counts


def outbox_delivery_counts(workspace: Workspace) -> dict[str, int]:
    """Deliveries, not hand-overs: sent items by what became of them."""
    by_value = dict(
        OutboxItem.objects.filter(workspace=workspace)
        .exclude(delivery="waiting")
        .values_list("delivery")
        .annotate(n=Count("pk"))
    )
    return {state: by_value.get(value, 0) for state, value in DELIVERY_COUNTED.items()}

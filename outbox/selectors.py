"""Reads of outbox items, scoped to a workspace."""

from __future__ import annotations

from django.db.models import QuerySet

from apikeys.models import Workspace
from outbox.exceptions import OutboxNotFound
from outbox.models import OutboxItem, Status


def outbox_list(workspace: Workspace, *, status: str | None = None) -> QuerySet[OutboxItem]:
    queryset = OutboxItem.objects.filter(workspace=workspace).defer("raw")
    if status:
        queryset = queryset.filter(status=status)
    return queryset


def outbox_get(workspace: Workspace, item_id: str) -> OutboxItem:
    item = OutboxItem.objects.filter(workspace=workspace, pk=item_id).defer("raw").first()
    if item is None:
        raise OutboxNotFound()
    return item


def outbox_pending_count(workspace: Workspace) -> int:
    """How many of the workspace's outgoing messages wait for a decision (the nav badge)."""
    return OutboxItem.objects.filter(workspace=workspace, status=Status.PENDING).count()

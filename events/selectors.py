"""Reads of the event log, scoped to a workspace."""

from __future__ import annotations

from events.models import Event


def event_recent(workspace_id: str, limit: int) -> list[Event]:
    """The workspace's newest ``limit`` events, newest first (the ``(workspace_id, -id)`` index)."""
    return list(Event.objects.filter(workspace_id=workspace_id).order_by("-id")[:limit])

"""Periodic work of the event hub (Celery beat; in-process in embedded mode)."""

from __future__ import annotations

from datetime import timedelta

from celery import shared_task
from django.conf import settings

from webhooks import events


@shared_task(name="webhooks.prune_events")
def prune_events() -> int:
    """Drops events older than ``EVENT_RETENTION_HOURS``."""
    return events.prune(older_than=timedelta(hours=settings.EVENT_RETENTION_HOURS))

"""Periodic work of the event log (Celery beat; in-process in embedded mode)."""

from __future__ import annotations

from datetime import timedelta

from celery import shared_task
from django.conf import settings

from events import services


@shared_task(name="events.prune")
def prune() -> int:
    """Drops events older than ``EVENT_RETENTION_HOURS``."""
    return services.prune(older_than=timedelta(hours=settings.EVENT_RETENTION_HOURS))

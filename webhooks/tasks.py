"""Periodic work of the event hub (Celery beat; in-process in embedded mode)."""

from __future__ import annotations

from datetime import timedelta

from celery import shared_task
from django.conf import settings

from webhooks import events, services


@shared_task(name="webhooks.prune_events")
def prune_events() -> int:
    """Drops events older than ``EVENT_RETENTION_HOURS``."""
    return events.prune(older_than=timedelta(hours=settings.EVENT_RETENTION_HOURS))


@shared_task(name="webhooks.deliver", acks_late=True)
def deliver(delivery_id: str) -> bool:
    """One attempt of a delivery (no-op unless it is due and free); schedules the next."""
    return services.attempt(delivery_id) is not None


@shared_task(name="webhooks.sweep")
def sweep() -> int:
    """Re-queues due deliveries the broker may have lost (the row is the truth)."""
    return services.sweep()

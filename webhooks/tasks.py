"""Webhook deliveries' background work (Celery; in-process in embedded mode)."""

from __future__ import annotations

from celery import shared_task

from webhooks import services


@shared_task(name="webhooks.deliver", acks_late=True)
def deliver(delivery_id: str) -> bool:
    """One attempt of a delivery (no-op unless it is due and free); schedules the next."""
    return services.attempt(delivery_id) is not None


@shared_task(name="webhooks.sweep")
def sweep() -> int:
    """Re-queues due deliveries the broker may have lost (the row is the truth)."""
    return services.sweep()

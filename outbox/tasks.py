"""Celery tasks of the outbox (in-process in embedded mode)."""

from __future__ import annotations

from celery import shared_task

from outbox import services


@shared_task(name="outbox.deliver", acks_late=True)
def deliver(item_id: str) -> bool:
    """One delivery attempt of a sent item (no-op unless due and free)."""
    return services.attempt_delivery(item_id)


@shared_task(name="outbox.sweep")
def sweep() -> int:
    return services.sweep()


@shared_task(name="outbox.expire_pending")
def expire_pending() -> int:
    return services.expire_pending()

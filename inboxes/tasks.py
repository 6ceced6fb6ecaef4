"""Periodic work of the inboxes app (Celery beat; in-process in embedded mode)."""

from __future__ import annotations

from celery import shared_task

from inboxes import services


@shared_task(name="inboxes.expire_due")
def expire_due() -> int:
    """Announces inboxes whose expiry passed (``inbox.expired``, once per expiry)."""
    return services.inboxes_expire_due()

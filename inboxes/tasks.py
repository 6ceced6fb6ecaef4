"""Periodic work of the inboxes app (Celery beat; in-process in embedded mode)."""

from __future__ import annotations

from celery import shared_task

from inboxes import services


@shared_task(name="inboxes.expire_due")
def expire_due() -> int:
    """Announces inboxes whose expiry passed (``inbox.expired``, once per expiry)."""
    return services.inboxes_expire_due()


@shared_task(name="inboxes.recheck_domains")
def recheck_domains() -> int:
    """Looks up the TXT record of custom domains not checked for ``DOMAIN_RECHECK_MINUTES``."""
    return services.domains_recheck_due()

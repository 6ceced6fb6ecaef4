"""Periodic work of the tenancy app (Celery beat; in-process in embedded mode)."""

from __future__ import annotations

from celery import shared_task

from apikeys import audit


@shared_task(name="apikeys.prune_audit")
def prune_audit() -> int:
    """Deletes audit log entries older than their workspace's ``audit_retention_days``."""
    return audit.prune()

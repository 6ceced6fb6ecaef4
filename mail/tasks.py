"""Celery tasks of the mail app (in-process in embedded mode)."""

from __future__ import annotations

from celery import shared_task

from mail import classification, services


@shared_task(name="mail.classify_email", acks_late=True)
def classify_email(email_id: str) -> int:
    """Classifier labels for a new email, then its announcement (email.received)."""
    return classification.classify_and_announce(email_id=email_id)


@shared_task(name="mail.announce_overdue")
def announce_overdue() -> int:
    """Announces emails whose classification was lost; the row says which."""
    return classification.announce_overdue()


@shared_task(name="mail.retention_sweep")
def retention_sweep() -> int:
    """Deletes expired inboxes past their grace and mail past its age (a time budget per run)."""
    swept = services.retention_sweep()
    return swept.inboxes + swept.emails

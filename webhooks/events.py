"""The one emitter. ``emit()`` records an event in the current transaction and, once that commits,
runs the registered after-commit hooks (wake-ups of waiters and streams, webhook fan-out).

Nothing else writes events. Callers pass ids and plain dicts, never domain models.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from django.db import transaction

from webhooks.models import Event

logger = logging.getLogger(__name__)

EMAIL_RECEIVED = "email.received"
EMAIL_LABELED = "email.labeled"
EMAIL_UPDATED = "email.updated"
EMAIL_DELETED = "email.deleted"
MAIL_REJECTED = "mail.rejected"
INBOX_CREATED = "inbox.created"
INBOX_EXPIRED = "inbox.expired"

AfterCommit = Callable[[Event], None]
_after_commit: list[AfterCommit] = []


def on_event(hook: AfterCommit) -> AfterCommit:
    """Registers ``hook`` to run after the commit of every event (decorator)."""
    _after_commit.append(hook)
    return hook


def _run_hooks(event: Event) -> None:
    for hook in _after_commit:
        try:
            hook(event)
        except Exception:  # a hook never undoes a committed event; the log stays the truth
            logger.exception("event hook %s failed for event %s", hook, event.pk)


def emit(*, workspace_id: str, type: str, data: dict[str, Any], inbox_id: str = "") -> Event:
    """Records the event now; wakes listeners after the surrounding transaction commits."""
    event = Event.objects.create(
        workspace_id=workspace_id, inbox_id=inbox_id or "", type=type, data=data
    )
    transaction.on_commit(lambda: _run_hooks(event))
    return event


def forget_inbox(inbox_id: str) -> int:
    """Drops the log of a deleted inbox (its mail is gone; so are the events describing it)."""
    deleted, _ = Event.objects.filter(inbox_id=inbox_id).delete()
    return deleted

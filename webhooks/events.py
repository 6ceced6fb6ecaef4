"""The one emitter. ``emit()`` records an event and its webhook deliveries in the current
transaction and, once that commits, runs the after-commit hooks: the wake-up of waiters and
streams, and the hand-over of the deliveries to workers.

Events of one inbox form a chain: each carries ``prev_id``, the id of the inbox's previous event.
``emit()`` takes a per-inbox lock for the rest of the transaction, so an inbox's events commit in
id order and a listener that holds event N can trust a wake-up whose ``prev_id`` is N without a
query; any other wake-up makes it read the log. A lost wake-up delays an event, never loses it.

Nothing else writes events. Callers pass ids and plain dicts, never domain models.
"""

from __future__ import annotations

import asyncio
import logging
import zlib
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import connection, transaction
from django.db.models import Max
from django.utils import timezone

from webhooks.models import Event
from webhooks.services import fan_out

logger = logging.getLogger(__name__)

EMAIL_RECEIVED = "email.received"
EMAIL_LABELED = "email.labeled"
EMAIL_UPDATED = "email.updated"
EMAIL_DELETED = "email.deleted"
MAIL_REJECTED = "mail.rejected"
INBOX_CREATED = "inbox.created"
INBOX_EXPIRED = "inbox.expired"

AfterCommit = Callable[[Event], None]
_publishing: set[asyncio.Task[None]] = set()  # wake-ups being published from a running loop
_after_commit: list[AfterCommit] = []
_in_transaction: list[AfterCommit] = []


def on_record(hook: AfterCommit) -> AfterCommit:
    """Registers ``hook`` to run inside the transaction that records each event (decorator):
    for work that must commit with the event or not at all (e.g. the forward_to copy)."""
    _in_transaction.append(hook)
    return hook


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


def _chain_head(inbox_id: str) -> int | None:
    """The id of the inbox's newest event, read under a per-inbox lock held to the commit."""
    if connection.vendor != "postgresql":
        # SQLite writers are serialised by the database already (IMMEDIATE transactions).
        return Event.objects.filter(inbox_id=inbox_id).aggregate(m=Max("id"))["m"]
    with connection.cursor() as cursor:  # lock and read in one round trip
        cursor.execute(
            "SELECT (SELECT pg_advisory_xact_lock(%s)) IS NULL, "
            "(SELECT max(id) FROM webhooks_event WHERE inbox_id = %s)",
            [zlib.crc32(inbox_id.encode()), inbox_id],
        )
        return cursor.fetchone()[1]


def emit(
    *,
    workspace_id: str,
    type: str,
    data: dict[str, Any],
    inbox_id: str = "",
    hints: dict[str, Any] | None = None,
) -> Event:
    """Records the event now; wakes listeners after the surrounding transaction commits.

    ``hints`` are objects the caller already holds (e.g. ``{"inbox": inbox}``), offered to the
    in-transaction hooks as ``event.hints`` so that they need not read them again.
    """
    with transaction.atomic():
        prev_id = _chain_head(inbox_id) if inbox_id else None
        event = Event.objects.create(
            workspace_id=workspace_id, inbox_id=inbox_id, type=type, data=data, prev_id=prev_id
        )
        event.hints = hints or {}
        fan_out(event)  # webhook deliveries commit with their event, or not at all
        for hook in _in_transaction:
            hook(event)
    transaction.on_commit(lambda: _run_hooks(event))
    return event


def forget_inbox(inbox_id: str) -> int:
    """Drops the log of a deleted inbox (its mail is gone; so are the events describing it)."""
    deleted, _ = Event.objects.filter(inbox_id=inbox_id).delete()
    return deleted


def inbox_group(inbox_id: str) -> str:
    """The channel-layer group of an inbox's listeners."""
    return f"inbox.{inbox_id}"


def wake_message(event: Event) -> dict[str, Any]:
    """What listeners receive: the event itself, so the common case needs no query."""
    return {
        "type": "event.wake",
        "id": event.pk,
        "prev_id": event.prev_id,
        "event": event.type,
        "inbox_id": event.inbox_id,
        "at": int(event.created_at.timestamp() * 1000),
        "data": event.data,
    }


def outbox_group(item_id: str) -> str:
    """The channel-layer group of the waiters on one outbox item."""
    return f"outbox.{item_id}"


@on_event
def wake_listeners(event: Event) -> None:
    """Publishes the event to its inbox's (or outbox item's) group on the channel layer."""
    if event.inbox_id:
        group = inbox_group(event.inbox_id)
    elif event.type.startswith("outbound.") and "outbound" in event.data:
        group = outbox_group(event.data["outbound"]["id"])
    else:
        return
    layer = get_channel_layer()
    if layer is None:
        return
    message = {**wake_message(event), "group": group}
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        async_to_sync(layer.group_send)(group, message)
    else:  # called from code running inside an event loop: publish from that loop
        task = loop.create_task(layer.group_send(group, message))
        _publishing.add(task)
        task.add_done_callback(_publishing.discard)


def prune(*, older_than: timedelta) -> int:
    """Deletes events older than ``older_than`` (the stream replays at least one hour)."""
    cutoff = timezone.now() - max(older_than, timedelta(hours=1))
    deleted, _ = Event.objects.filter(created_at__lt=cutoff).delete()
    return deleted

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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import connection, transaction
from django.db.models import Max
from django.utils import timezone

from config.rows import bulk_insert
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

InTransaction = Callable[[Event], None]
AfterCommit = Callable[[Sequence[Event]], None]
_publishing: set[asyncio.Task[None]] = set()  # wake-ups being published from a running loop
_after_commit: list[AfterCommit] = []
_in_transaction: list[InTransaction] = []


def on_record(hook: InTransaction) -> InTransaction:
    """Registers ``hook`` to run inside the transaction that records each event (decorator):
    for work that must commit with the event or not at all (e.g. the forward_to copy)."""
    _in_transaction.append(hook)
    return hook


def on_event(hook: AfterCommit) -> AfterCommit:
    """Registers ``hook`` to run after the commit of every batch of events (decorator)."""
    _after_commit.append(hook)
    return hook


def _run_hooks(records: Sequence[Event]) -> None:
    for hook in _after_commit:
        try:
            hook(records)
        except Exception:  # a hook never undoes a committed event; the log stays the truth
            logger.exception("event hook %s failed for events %s", hook, [e.pk for e in records])


def _chain_heads(inbox_ids: Sequence[str]) -> dict[str, int | None]:
    """The id of each inbox's newest event, read under per-inbox locks held to the commit.

    The locks are taken in the order given (callers sort), so two batches never deadlock.
    """
    if not inbox_ids:
        return {}
    if connection.vendor != "postgresql":
        # SQLite writers are serialised by the database already (IMMEDIATE transactions).
        rows = (
            Event.objects.unscoped()  # the hub chains the events of inboxes it holds locked
            .filter(inbox_id__in=inbox_ids)
            .values("inbox_id")
            .annotate(head=Max("id"))
            .values_list("inbox_id", "head")
        )
        return {inbox_id: None for inbox_id in inbox_ids} | dict(rows)
    with connection.cursor() as cursor:  # lock and read in one round trip
        cursor.execute(
            "SELECT i.id, (SELECT pg_advisory_xact_lock(i.lock)) IS NULL, "
            "(SELECT max(e.id) FROM webhooks_event e WHERE e.inbox_id = i.id) "
            "FROM unnest(%s::text[], %s::bigint[]) WITH ORDINALITY AS i(id, lock, n) ORDER BY i.n",
            [list(inbox_ids), [zlib.crc32(inbox_id.encode()) for inbox_id in inbox_ids]],
        )
        return {inbox_id: head for inbox_id, _, head in cursor.fetchall()}


@dataclass
class Change:
    """An event to record: what :func:`emit` takes, as a value (see :func:`emit_many`)."""

    workspace_id: str
    type: str
    data: dict[str, Any]
    inbox_id: str = ""
    hints: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # An event whose data names an inbox belongs to that inbox, whoever emits it: it is
        # chained with the inbox's events and webhook inbox filters apply to it.
        inbox = self.data.get("inbox")
        if not self.inbox_id and isinstance(inbox, dict) and isinstance(inbox.get("id"), str):
            self.inbox_id = inbox["id"]


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
    change = Change(workspace_id, type, data, inbox_id, hints or {})
    return emit_many([change])[0]


def emit_many(changes: Sequence[Change]) -> list[Event]:
    """Records several events in one go (the receive path stores mail in batches): one chain
    read for all their inboxes, one insert of the events and one of their deliveries, one
    after-commit publication. Per inbox, the events chain in the order given."""
    if not changes:
        return []
    # No savepoint: the events commit with the change they describe or not at all, so an error
    # here must fail the caller's transaction, never leave it to commit without them (and a
    # savepoint costs two round trips per batch of received mail).
    with transaction.atomic(savepoint=False):
        heads = _chain_heads(sorted({c.inbox_id for c in changes if c.inbox_id}))
        records = bulk_insert(
            Event,
            (
                Event(
                    workspace_id=c.workspace_id,
                    inbox_id=c.inbox_id,
                    type=c.type,
                    data=c.data,
                    prev_id=heads.get(c.inbox_id),
                )
                for c in changes
            ),
        )
        relinked = []
        for change, event in zip(changes, records, strict=True):
            event.hints = change.hints
            if change.inbox_id:
                if event.prev_id != heads[change.inbox_id]:
                    event.prev_id = heads[change.inbox_id]
                    relinked.append(event)
                heads[change.inbox_id] = event.pk
        if relinked:  # a second event of one inbox in this batch follows the first
            Event.objects.unscoped().bulk_update(relinked, ["prev_id"])  # rows made just now
        fan_out(records)  # webhook deliveries commit with their events, or not at all
        # Registered before the in-transaction hooks run: events they emit (a forwarded copy's
        # outbound.*) follow these in the inbox's chain, and are published after them too.
        transaction.on_commit(lambda: _run_hooks(records))
        for event in records:
            for hook in _in_transaction:
                hook(event)
    return records


def forget_inbox(workspace_id: str, inbox_id: str) -> int:
    """Drops the log of a deleted inbox (its mail is gone; so are the events describing it)."""
    deleted, _ = Event.objects.filter(workspace_id=workspace_id, inbox_id=inbox_id).delete()
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


def _groups_of(event: Event) -> list[str]:
    """Where an event's wake-up goes: its inbox's listeners (the chain stays whole for them)
    and, for an outbound event, the waiters on that outbox item."""
    groups = [inbox_group(event.inbox_id)] if event.inbox_id else []
    if event.type.startswith("outbound.") and "outbound" in event.data:
        groups.append(outbox_group(event.data["outbound"]["id"]))
    return groups


@on_event
def wake_listeners(records: Sequence[Event]) -> None:
    """Publishes each event to its inbox's group (an outbound event also to its outbox item's)
    on the channel layer, in order: from a thread, with Redis, as one pipeline of ``PUBLISH``
    commands sent from that thread (``config.layers.PubSubLayer``); else the whole batch in one
    hop to the event loop."""
    layer = get_channel_layer()
    if layer is None:
        return
    messages = [
        (group, {**wake_message(event), "group": group})
        for event in records
        for group in _groups_of(event)
    ]
    if not messages:
        return

    async def publish() -> None:
        for group, message in messages:
            await layer.group_send(group, message)

    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        send_many = getattr(layer, "group_send_many", None)
        if send_many is not None:
            send_many(messages)
        else:
            async_to_sync(publish)()
    else:  # called from code running inside an event loop: publish from that loop
        task = loop.create_task(publish())
        _publishing.add(task)
        task.add_done_callback(_publishing.discard)


def prune(*, older_than: timedelta) -> int:
    """Deletes events older than ``older_than`` (the stream replays at least one hour)."""
    cutoff = timezone.now() - max(older_than, timedelta(hours=1))
    deleted, _ = Event.objects.unscoped().filter(created_at__lt=cutoff).delete()
    return deleted

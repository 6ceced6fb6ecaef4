"""The one emitter. ``emit()`` records an event in the current transaction, runs the hooks other
apps registered on recorded events (webhook fan-out, the forward_to copy) in that transaction and,
once it commits, wakes the listeners (:mod:`events.wake`).

Events of one inbox form a chain: each carries ``prev_id``, the id of the inbox's previous event.
``emit()`` takes a per-inbox lock for the rest of the transaction, so an inbox's events commit in
id order and a listener that holds event N can trust a wake-up whose ``prev_id`` is N without a
query; any other wake-up makes it read the log. A lost wake-up delays an event, never loses it.

Nothing else writes events. Callers pass ids and plain dicts, never domain models; this module
reads no payload beyond the envelope it defines (``data["inbox"]["id"]``, see :class:`Change`).
"""

from __future__ import annotations

import logging
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.db import connection, transaction
from django.db.models import Max, Model
from django.utils import timezone

from config import rows
from config.rows import bulk_insert
from events import wake
from events.models import Event

logger = logging.getLogger(__name__)

EMAIL_RECEIVED = "email.received"
EMAIL_LABELED = "email.labeled"
EMAIL_UPDATED = "email.updated"
EMAIL_DELETED = "email.deleted"
MAIL_REJECTED = "mail.rejected"
INBOX_CREATED = "inbox.created"
INBOX_EXPIRED = "inbox.expired"
INBOX_DELETED = "inbox.deleted"

OnRecord = Callable[[Sequence[Event]], None]
# What a hook says about an event it is offered before the event exists (its workspace, inbox
# and type): True, it has nothing to do; (sql, params), it has nothing to do when that SQL
# condition holds; False, it may have work.
IdleIf = Callable[[str, str, str], "bool | tuple[str, list[Any]]"]
_recording: list[OnRecord] = []  # hooks that write rows about the events, and emit none
_reacting: list[OnRecord] = []  # hooks that may emit events of their own
_idle_if: dict[OnRecord, IdleIf] = {}


def on_record(
    hook: OnRecord | None = None, *, emits: bool = False, idle_if: IdleIf | None = None
) -> Any:
    """Registers ``hook`` to run with each batch of recorded events inside the transaction that
    records them (usable as a decorator), for work that must commit with the events or not at
    all: webhook deliveries, the forward_to copy.

    Hooks that ``emits`` events run after all the others, so that what is recorded about a batch
    (its webhook deliveries) comes before the events the batch causes, whatever the order in which
    apps registered their hooks.

    ``idle_if(workspace_id, inbox_id, type)`` tells :func:`insert_with_event` when the hook has
    nothing to do for an event (see :data:`IdleIf`); a hook without it never lets an event be
    recorded that way.
    """

    def register(fn: OnRecord) -> OnRecord:
        (_reacting if emits else _recording).append(fn)
        if idle_if is not None:
            _idle_if[fn] = idle_if
        return fn

    return register if hook is None else register(hook)


def _idle_condition(workspace_id: str, inbox_id: str, type: str) -> tuple[str, list[Any]] | None:
    """The SQL condition under which no hook has work for such an event (``TRUE`` when none
    has any whatever the data says); None when some hook may have work."""
    conditions: list[str] = []
    params: list[Any] = []
    for hook in (*_recording, *_reacting):
        idle_if = _idle_if.get(hook)
        answer = idle_if(workspace_id, inbox_id, type) if idle_if is not None else False
        if answer is True:
            continue
        if not isinstance(answer, tuple):  # False, or anything not a condition: it may have work
            return None
        conditions.append(f"({answer[0]})")
        params.extend(answer[1])
    return " AND ".join(conditions) or "TRUE", params


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
            f"(SELECT max(e.id) FROM {Event._meta.db_table} e WHERE e.inbox_id = i.id) "
            "FROM unnest(%s::text[], %s::bigint[]) WITH ORDINALITY AS i(id, lock, n) ORDER BY i.n",
            [list(inbox_ids), [zlib.crc32(inbox_id.encode()) for inbox_id in inbox_ids]],
        )
        return {inbox_id: head for inbox_id, _, head in cursor.fetchall()}


@dataclass
class Change:
    """An event to record: what :func:`emit` takes, as a value (see :func:`emit_many`).

    ``wake`` names channel-layer groups to wake besides the inbox's (e.g. the waiters on one
    outbox item); ``hints`` are objects the caller already holds, offered to the hooks as
    ``event.hints`` so that they need not read them again. ``first`` says that the inbox was
    created in this very transaction: its chain is empty, and no other transaction can add to
    it before this one commits (nobody else sees the inbox yet), so its head is neither read
    nor locked (``inbox.created``: one round trip less per create).
    """

    workspace_id: str
    type: str
    data: dict[str, Any]
    inbox_id: str = ""
    hints: dict[str, Any] = field(default_factory=dict)
    wake: Sequence[str] = ()
    first: bool = False

    def __post_init__(self) -> None:
        # The log's one envelope rule: an event whose data names an inbox belongs to that inbox,
        # whoever emits it; it is chained with the inbox's events and inbox filters apply to it.
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
    wake: Sequence[str] = (),
    first: bool = False,
) -> Event:
    """Records the event now; wakes listeners after the surrounding transaction commits
    (``first``: see :class:`Change`)."""
    change = Change(workspace_id, type, data, inbox_id, hints or {}, tuple(wake), first)
    return emit_many([change])[0]


def emit_many(changes: Sequence[Change]) -> list[Event]:
    """Records several events in one go (the receive path stores mail in batches): one chain
    read for all their inboxes, one insert, one run of each hook, one after-commit publication.
    Per inbox, the events chain in the order given."""
    if not changes:
        return []
    # No savepoint: the events commit with the change they describe or not at all, so an error
    # here must fail the caller's transaction, never leave it to commit without them (and a
    # savepoint costs two round trips per batch of received mail).
    with transaction.atomic(savepoint=False):
        fresh = {c.inbox_id for c in changes if c.inbox_id and c.first}
        chained = {c.inbox_id for c in changes if c.inbox_id} - fresh
        heads = _chain_heads(sorted(chained)) | dict.fromkeys(fresh)
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
            event.wake = tuple(change.wake)
            if change.inbox_id:
                if event.prev_id != heads[change.inbox_id]:
                    event.prev_id = heads[change.inbox_id]
                    relinked.append(event)
                heads[change.inbox_id] = event.pk
        if relinked:  # a second event of one inbox in this batch follows the first
            Event.objects.unscoped().bulk_update(relinked, ["prev_id"])  # rows made just now
        for hook in _recording:  # e.g. webhook deliveries: commit with their events, or not at all
            hook(records)
        # Registered before the hooks that emit run: events they emit (a forwarded copy's
        # outbound.*) follow these in the inbox's chain, and are published after them too.
        heard = [e for c, e in zip(changes, records, strict=True) if not _unheard(c, e)]
        if heard:
            transaction.on_commit(lambda: _publish(heard))
        for hook in _reacting:
            hook(records)
    return records


def insert_with_event(
    row: Model, *, workspace_id: str, type: str, data: dict[str, Any]
) -> Event | None:
    """Inserts ``row``, a new inbox (its primary key is the inbox id), with the first event of
    its chain (``first``, see :class:`Change`) in **one statement**, committed as it runs, when
    no hook has work for the event, and returns the event. Otherwise — a hook that may have
    work (a webhook endpoint that wants the event), a transaction already open, SQLite — it
    writes nothing and returns None, and the caller inserts the row and records the event with
    :func:`emit` in a transaction as usual.

    Each hook's ``idle_if`` answers before anything is written; a condition it gives (no
    enabled endpoint of the workspace wants the type) is part of the statement, so it is read
    in the same snapshot as the insert: an endpoint committed before the statement sends it
    the transactional way, where its delivery commits with the event as ``emit`` records it.
    No wake-up is published when nobody can be listening yet (:func:`_unheard`).
    A unique violation of the row is Django's ``IntegrityError``, and nothing is written. One
    round trip where the transactional way takes five (``BEGIN``, the row, the event, the
    hooks' read, ``COMMIT``): ``POST /inboxes`` (issue 32).
    """
    if (
        connection.vendor != "postgresql"
        or connection.in_atomic_block
        or not connection.get_autocommit()  # a transaction the caller manages by hand
    ):
        return None
    if not (rows.plain_insert(row.__class__) and rows.plain_insert(Event)):
        return None
    inbox_id = str(row.pk)
    idle = _idle_condition(workspace_id, inbox_id, type)
    if idle is None:
        return None
    event = rows.new(Event, workspace_id=workspace_id, inbox_id=inbox_id, type=type, data=data)
    if not rows.insert_pair(row, event, where=idle[0], params=idle[1]):
        return None  # a hook's condition failed: it has work, which needs the transaction
    event.hints = {}
    event.wake = ()
    if not _unheard(Change(workspace_id, type, data, inbox_id, first=True), event):
        _publish([event])  # committed already (autocommit, one statement)
    return event


def _unheard(change: Change, event: Event) -> bool:
    """Whether no listener can be waiting for ``event``'s wake-up, so none is published: the
    first event of an inbox created in the same transaction, when it goes to that inbox's group
    only (not an email event of the workspace's group, no extra groups named). Nobody can listen
    to an inbox before the transaction that creates it commits: a waiter or stream finds the
    inbox first, and reads the log after it subscribes (:mod:`events.listen`), where the event
    is. (``inbox.created``: one Redis round trip less per create.)"""
    return change.first and wake.groups_of(event) == [wake.inbox_group(change.inbox_id)]


def _publish(records: Sequence[Event]) -> None:
    try:
        wake.publish(records)
    except Exception:  # a wake-up never undoes a committed event; the log stays the truth
        logger.exception("wake-up failed for events %s", [e.pk for e in records])


def forget_inbox(workspace_id: str, inbox_id: str) -> int:
    """Drops the log of a deleted inbox (its mail is gone; so are the events describing it)."""
    deleted, _ = Event.objects.filter(workspace_id=workspace_id, inbox_id=inbox_id).delete()
    return deleted


def forget_workspace(workspace_id: str) -> int:
    """Drops the log of a workspace that is being deleted."""
    deleted, _ = Event.objects.filter(workspace_id=workspace_id).delete()
    return deleted


def prune(*, older_than: timedelta) -> int:
    """Deletes events older than ``older_than`` (the stream replays at least one hour)."""
    cutoff = timezone.now() - max(older_than, timedelta(hours=1))
    deleted, _ = Event.objects.unscoped().filter(created_at__lt=cutoff).delete()
    return deleted

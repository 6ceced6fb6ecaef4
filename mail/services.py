"""Writes of emails: flags, manual labels, deletion, retention (expired inboxes past their grace,
mail past its age). Counters of the inbox move with them."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone

from apikeys.audit import Actor
from config.rows import placeholders
from events import services as events
from inboxes import selectors as inbox_selectors
from inboxes import services as inbox_services
from inboxes.models import Inbox
from labels import selectors as label_selectors
from labels import services as label_services
from labels.classifier.base import facts_of
from labels.models import EmailLabel
from mail import selectors as mail_selectors
from mail.models import Attachment, Email, RawMessage


def _set_read(email: Email, read: bool) -> bool:
    """Flips the read flag if needed, keeping the inbox's unread count exact under races."""
    changed = Email.objects.filter(
        workspace_id=email.workspace_id, pk=email.pk, read=not read
    ).update(read=read)
    if changed:
        Inbox.objects.filter(workspace_id=email.workspace_id, pk=email.inbox_id).update(
            unread_count=F("unread_count") + (-1 if read else 1)
        )
    email.read = read
    return bool(changed)


def _emit_updated(email: Email) -> None:
    events.emit(
        workspace_id=email.workspace_id,
        inbox_id=email.inbox_id,
        type=events.EMAIL_UPDATED,
        data={
            "email": {
                "id": email.pk,
                "read": email.read,
                "starred": email.starred,
                "labels": label_selectors.labels_of_email(email),
            }
        },
    )


def email_update(
    *,
    email: Email,
    read: bool | None = None,
    starred: bool | None = None,
    labels: Sequence[str] | None = None,
    remove_labels: Sequence[str] | None = None,
) -> Email:
    """Sets flags, replaces manual labels, removes labels; emits ``email.updated`` if anything
    changed. Manual labels and removed classifier labels teach the built-in classifier."""
    with transaction.atomic():
        changed = False
        if labels is not None:
            found = label_selectors.labels_by_keys(email.workspace, labels)
            label_services.manual_labels_set(email=email, labels=found, facts=facts_of(email))
            changed = True
        if remove_labels:
            found = label_selectors.labels_by_keys(
                email.workspace, remove_labels, path="remove_labels"
            )
            changed |= bool(
                label_services.labels_remove(email=email, labels=found, facts=facts_of(email))
            )
        if read is not None:
            changed |= _set_read(email, read)
        if starred is not None and starred != email.starred:
            Email.objects.filter(workspace_id=email.workspace_id, pk=email.pk).update(
                starred=starred
            )
            email.starred = starred
            changed = True
        if changed:
            _emit_updated(email)
    return email


def email_mark_read(*, email: Email) -> Email:
    """GET /emails/{id}?mark_read=true."""
    with transaction.atomic():
        if _set_read(email, True):
            _emit_updated(email)
    return email


def email_delete(*, email: Email) -> None:
    """Removes the email with its raw bytes and attachments; emits ``email.deleted``. The inbox
    row is locked first, as every path that deletes mail does (the receive path, the retention
    sweep), so two of them never wait on each other in opposite orders."""
    with transaction.atomic():
        _lock_inboxes(email.workspace_id, [email.inbox_id])
        rows = Email.objects.filter(workspace_id=email.workspace_id, pk=email.pk)
        deleted = rows.values_list("read", flat=True).first()
        if deleted is None:
            return
        size = mail_selectors.stored_bytes_of(email.workspace_id, [email.pk])
        rows.only("pk").delete()
        Inbox.objects.filter(workspace_id=email.workspace_id, pk=email.inbox_id).update(
            email_count=F("email_count") - 1,
            unread_count=F("unread_count") - (0 if deleted else 1),
            stored_bytes=F("stored_bytes") - size,
        )
        events.emit(
            workspace_id=email.workspace_id,
            inbox_id=email.inbox_id,
            type=events.EMAIL_DELETED,
            data={"email": {"id": email.pk}},
        )


# --- retention ----------------------------------------------------------------------------------
#
# Mail is deleted in chunks of RETENTION_CHUNK emails, each in a transaction of its own that locks
# the inboxes concerned (in id order, as the receive path does) for as long as one chunk's DELETE
# takes: a purge of a million emails never makes an SMTP session wait longer than one chunk.


RETENTION = Actor.system("retention")  # who deletes an inbox past its grace (the audit log)


def _lock_inboxes(workspace_id: str, inbox_ids: Sequence[str]) -> list[Inbox]:
    return list(
        Inbox.objects.select_for_update()
        .filter(workspace_id=workspace_id, pk__in=sorted(set(inbox_ids)))
        .order_by("pk")
    )


def _delete_locked(workspace_id: str, inbox: Inbox, email_ids: Sequence[str]) -> int:
    """Deletes those of ``email_ids`` still in ``inbox`` (locked by the caller) with their raw
    bytes, attachments and labels, and moves its counters by what went.

    Four plain ``DELETE``s (labels, attachments, raw bytes, emails; the foreign keys are checked
    at commit), after one ``SELECT`` of the bytes the rows take as stored and the last
    ``RETURNING`` the read flags: the ORM's cascade would first read the emails and then delete
    each related table by a query of its own, a chunk's cost that the purge of a million emails
    pays two thousand times."""
    ids = list(email_ids)
    if not ids:
        return 0
    mine = (
        f"SELECT id FROM {Email._meta.db_table} WHERE workspace_id = %s AND inbox_id = %s "
        f"AND id IN ({placeholders(len(ids))})"
    )
    scope = [workspace_id, inbox.pk, *ids]
    with connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {EmailLabel._meta.db_table} WHERE email_id IN ({mine})", scope)
        # What the rows take as stored, read before they go (mail.selectors.stored_bytes_of).
        cursor.execute(mail_selectors.stored_bytes_sql(mine), [*scope, *scope])
        stored = cursor.fetchone()[0]
        cursor.execute(f"DELETE FROM {Attachment._meta.db_table} WHERE email_id IN ({mine})", scope)
        cursor.execute(f"DELETE FROM {RawMessage._meta.db_table} WHERE email_id IN ({mine})", scope)
        cursor.execute(
            f"DELETE FROM {Email._meta.db_table} WHERE id IN ({mine}) RETURNING read", scope
        )
        rows = cursor.fetchall()
    if not rows:
        return 0
    Inbox.objects.filter(workspace_id=workspace_id, pk=inbox.pk).update(
        email_count=F("email_count") - len(rows),
        unread_count=F("unread_count") - sum(1 for (read,) in rows if not read),
        stored_bytes=F("stored_bytes") - stored,
    )
    return len(rows)


def emails_delete_chunk(*, workspace_id: str, email_ids: Sequence[tuple[str, str]]) -> int:
    """Deletes ``(email id, inbox id)`` pairs of one workspace in one short transaction (inboxes
    locked in id order); returns how many were still there."""
    by_inbox: dict[str, list[str]] = {}
    for email_id, inbox_id in email_ids:
        by_inbox.setdefault(inbox_id, []).append(email_id)
    with transaction.atomic():
        return sum(
            _delete_locked(workspace_id, inbox, by_inbox[inbox.pk])
            for inbox in _lock_inboxes(workspace_id, list(by_inbox))
        )


def inbox_purge(
    *,
    workspace_id: str,
    inbox_id: str,
    expired_before: datetime | None = None,
    reason: str = inbox_services.DELETED_BY_RETENTION,
    deadline: float | None = None,
) -> bool:
    """Deletes an inbox's mail a chunk per transaction, then the inbox (``inbox.deleted``).

    With ``expired_before`` each chunk first checks the inbox still expired before then (one
    extended meanwhile is active again and keeps what is left). Returns whether the inbox went;
    false also when ``deadline`` (``time.monotonic()``) passed first: the next sweep goes on."""
    chunk = settings.RETENTION_CHUNK
    after = ""  # keyset: each chunk's index scan starts past what the last one deleted
    while True:
        started = time.monotonic()
        with transaction.atomic():
            inbox = next(iter(_lock_inboxes(workspace_id, [inbox_id])), None)
            if inbox is None:
                return False
            if expired_before is not None and (
                inbox.expires_at is None or inbox.expires_at > expired_before
            ):
                return False
            ids = mail_selectors.email_ids_of_inbox(
                workspace_id, inbox_id, after=after, limit=chunk
            )
            if not ids:
                inbox_services.inbox_delete(inbox=inbox, by=RETENTION, reason=reason)
                return True
            _delete_locked(workspace_id, inbox, ids)
            after = ids[-1]
        if deadline is not None and time.monotonic() >= deadline:
            return False
        _pause(time.monotonic() - started)


def _pause(busy: float) -> None:
    """Between two chunks: ``RETENTION_PAUSE`` times as long as the last one took, so the sweep
    uses about 1 / (1 + RETENTION_PAUSE) of the time it runs and leaves the rest to ingest."""
    if settings.RETENTION_PAUSE:
        time.sleep(settings.RETENTION_PAUSE * busy)


@dataclass
class Swept:
    """What one retention sweep deleted."""

    inboxes: int = 0
    emails: int = 0


def retention_sweep(*, now: datetime | None = None, seconds: float | None = None) -> Swept:
    """Deletes expired inboxes past their workspace's grace (``expired_inbox_grace_hours``)
    with their mail, then mail older than each workspace's ``email_retention_days``, for at
    most ``seconds`` (``RETENTION_SWEEP_SECONDS``); what is left waits for the next sweep."""
    now = now or timezone.now()
    budget = settings.RETENTION_SWEEP_SECONDS if seconds is None else seconds
    deadline = time.monotonic() + budget
    swept = Swept()
    for grace in inbox_selectors.retention_graces():
        expired_before = now - timedelta(hours=grace)
        done: set[str] = set()
        while time.monotonic() < deadline:
            due = [
                row
                for row in inbox_selectors.inboxes_past_grace(grace, expired_before)
                if row[0] not in done
            ]
            if not due:
                break
            for inbox_id, workspace_id in due:
                done.add(inbox_id)  # gone, extended, or left for the next sweep: not again
                if inbox_purge(
                    workspace_id=workspace_id,
                    inbox_id=inbox_id,
                    expired_before=expired_before,
                    deadline=deadline,
                ):
                    swept.inboxes += 1
                if time.monotonic() >= deadline:
                    return swept
    for workspace_id, days in inbox_selectors.retention_ages():
        cutoff = now - timedelta(days=days)
        since = None  # keyset, as in inbox_purge: never rescan what was deleted
        while (started := time.monotonic()) < deadline:
            old = mail_selectors.emails_received_before(
                workspace_id, cutoff, since=since, limit=settings.RETENTION_CHUNK
            )
            if not old:
                break
            since = old[-1][2]
            swept.emails += emails_delete_chunk(
                workspace_id=workspace_id, email_ids=[(pk, inbox) for pk, inbox, _ in old]
            )
            _pause(time.monotonic() - started)
    return swept


def workspace_mail_purge(workspace_id: str) -> int:
    """All the mail of a workspace that is being deleted, a chunk per transaction (the
    ``apikeys.services.on_workspace_delete`` hook: the cascade that follows then has no mail
    to load). Emits nothing: the workspace's endpoints and streams go with it."""
    deleted = 0
    for inbox_id in inbox_selectors.inbox_ids_of(workspace_id):
        after = ""
        while True:
            ids = mail_selectors.email_ids_of_inbox(
                workspace_id, inbox_id, after=after, limit=settings.RETENTION_CHUNK
            )
            if not ids:
                break
            after = ids[-1]
            deleted += emails_delete_chunk(
                workspace_id=workspace_id, email_ids=[(pk, inbox_id) for pk in ids]
            )
    return deleted

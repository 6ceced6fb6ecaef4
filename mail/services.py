"""Writes of emails: flags, manual labels, deletion. Counters of the inbox move with them."""

from __future__ import annotations

from collections.abc import Sequence

from django.db import transaction
from django.db.models import F

from events import services as events
from inboxes.models import Inbox
from labels import selectors as label_selectors
from labels import services as label_services
from labels.classifier.base import facts_of
from mail.models import Email


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
    """Removes the email with its raw bytes and attachments; emits ``email.deleted``."""
    with transaction.atomic():
        rows = Email.objects.filter(workspace_id=email.workspace_id, pk=email.pk)
        deleted = rows.values_list("read", flat=True).first()
        if deleted is None:
            return
        rows.delete()
        Inbox.objects.filter(workspace_id=email.workspace_id, pk=email.inbox_id).update(
            email_count=F("email_count") - 1,
            unread_count=F("unread_count") - (0 if deleted else 1),
        )
        events.emit(
            workspace_id=email.workspace_id,
            inbox_id=email.inbox_id,
            type=events.EMAIL_DELETED,
            data={"email": {"id": email.pk}},
        )

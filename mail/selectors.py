"""Reads of emails, raw messages and attachments; every lookup is scoped to a workspace."""

from __future__ import annotations

from datetime import datetime

from django.db.models import Prefetch, QuerySet
from django.db.models.functions import Substr

from apikeys.models import Workspace
from inboxes.models import Inbox
from labels.models import EmailLabel
from mail.exceptions import AttachmentNotFound, EmailNotFound
from mail.models import Attachment, Email, RawMessage
from mail.parsing import decode_part

LIST_FIELDS = (
    "id",
    "inbox_id",
    "workspace_id",
    "from_address",
    "from_name",
    "to",
    "subject",
    "preview",
    "read",
    "starred",
    "has_attachments",
    "received_at",
)


def _with_labels(queryset: QuerySet[Email]) -> QuerySet[Email]:
    return queryset.prefetch_related(
        Prefetch("email_labels", queryset=EmailLabel.objects.order_by("created_at", "pk"))
    )


def email_list(
    workspace: Workspace,
    *,
    inbox: Inbox | None = None,
    q: str = "",
    label: str = "",
    unread: bool | None = None,
    since: datetime | None = None,
) -> QuerySet[Email]:
    """Emails of the workspace (or one of its inboxes) matching the list filters."""
    queryset = Email.objects.filter(workspace=workspace)
    if inbox is not None:
        queryset = queryset.filter(inbox=inbox)
    if q:
        # search_text is lower-cased at receipt; a plain LIKE uses the trigram index.
        queryset = queryset.filter(search_text__contains=q.lower())
    if label:
        queryset = queryset.filter(email_labels__key=label)
    if unread is not None:
        queryset = queryset.filter(read=not unread)
    if since is not None:
        queryset = queryset.filter(received_at__gt=since)
    return _with_labels(queryset.only(*LIST_FIELDS))


def email_get(workspace: Workspace, email_id: str) -> Email:
    """The full email record, or not_found."""
    email = (
        _with_labels(Email.objects.filter(workspace=workspace, pk=email_id))
        .prefetch_related(Prefetch("attachments", queryset=Attachment.objects.defer("content")))
        .first()
    )
    if email is None:
        raise EmailNotFound()
    return email


def email_raw(workspace: Workspace, email_id: str) -> bytes:
    """The message exactly as received."""
    email = Email.objects.filter(workspace=workspace, pk=email_id).select_related("raw").first()
    if email is None:
        raise EmailNotFound()
    return bytes(email.raw.content)


def attachment_get(workspace: Workspace, email_id: str, attachment_id: str) -> Attachment:
    """An attachment of one of the workspace's emails (its bytes: :func:`attachment_content`)."""
    attachment = Attachment.objects.filter(
        pk=attachment_id, email_id=email_id, email__workspace=workspace
    ).first()
    if attachment is None:
        raise AttachmentNotFound()
    return attachment


def attachment_content(workspace: Workspace, attachment: Attachment) -> bytes:
    """The attachment's bytes: as stored, or decoded from its span of the raw message (only
    that span is read from the database)."""
    if attachment.content is not None:
        return bytes(attachment.content)
    start, end = attachment.raw_start or 0, attachment.raw_end or 0
    encoded = (
        RawMessage.objects.filter(email_id=attachment.email_id, email__workspace=workspace)
        .annotate(part=Substr("content", start + 1, end - start))
        .values_list("part", flat=True)
        .first()
    )
    if encoded is None:
        raise AttachmentNotFound()
    return decode_part(bytes(encoded), attachment.transfer_encoding)

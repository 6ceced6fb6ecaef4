"""Emails, their raw bytes and attachments.

Raw messages and attachment bytes live in the database (``RawMessage``, ``Attachment.content``),
in the same transaction as the email row: one commit makes a message durable, one cascade removes
everything. An attachment whose encoded bytes lie in the raw message as they are keeps only their
span (``raw_start``, ``raw_end``, ``transfer_encoding``) and is decoded from the raw message when
read, so its bytes are not stored twice. docs/architecture.md (Storage) gives the reasons and
the benchmarks that measure them; the large columns are compressed with LZ4
(``config.postgresql.compression``).
"""

from __future__ import annotations

from django.db import models

from config.api.ids import new_id
from config.tenancy import Tenancy, TenantManager
from mail.message.htmltext import html_to_text


def _eml_id() -> str:
    return new_id("eml")


def _att_id() -> str:
    return new_id("att")


class Email(models.Model):
    id = models.CharField(primary_key=True, max_length=32, default=_eml_id, editable=False)
    # No index of their own: the composite indexes below lead with each of them (every insert
    # pays for every index; see the 0003 migration).
    workspace = models.ForeignKey(
        "apikeys.Workspace", on_delete=models.CASCADE, related_name="+", db_index=False
    )
    inbox = models.ForeignKey(
        "inboxes.Inbox", on_delete=models.CASCADE, related_name="emails", db_index=False
    )
    message_id = models.CharField(max_length=998, blank=True, default="")
    envelope_from = models.CharField(max_length=320, blank=True, default="")
    envelope_to = models.CharField(max_length=320, blank=True, default="")
    # Every envelope recipient this copy was stored for: the recipients of the message whose
    # address is this inbox's (plus tags), or, for mail sent with the inbox's sandbox SMTP
    # credential, every recipient of the message. Empty on rows stored before the field: the
    # API then shows ``[envelope_to]``.
    envelope_recipients = models.JSONField(default=list, blank=True)
    from_address = models.CharField(max_length=320, blank=True, default="")
    from_name = models.CharField(max_length=320, blank=True, default="")
    to = models.JSONField(default=list)
    cc = models.JSONField(default=list)
    reply_to = models.JSONField(default=list)
    subject = models.TextField(blank=True, default="")
    text = models.TextField(blank=True, default="")
    html = models.TextField(blank=True, default="")
    headers = models.JSONField(default=list)
    preview = models.CharField(max_length=200, blank=True, default="")
    # Lower-cased "from address, from name, subject, preview": what ``q`` searches (trigram index).
    search_text = models.TextField(blank=True, default="", editable=False)
    size = models.PositiveIntegerField(default=0)
    in_reply_to = models.CharField(max_length=998, blank=True, default="")
    references = models.JSONField(default=list)
    extracted = models.JSONField(default=dict)
    defects = models.JSONField(default=list)
    has_attachments = models.BooleanField(default=False)
    # SPF, DKIM, DMARC and ARC verdicts (mail.authentication.check); null when not checked
    # (MAIL_AUTH_CHECKS off, or not received over SMTP).
    authentication = models.JSONField(null=True, blank=True, default=None)
    read = models.BooleanField(default=False)
    starred = models.BooleanField(default=False)
    received_at = models.DateTimeField()
    # When email.received went out; null while the classifier is still deciding (the row is the
    # truth: a sweeper announces emails whose classification task was lost).
    announced_at = models.DateTimeField(null=True, blank=True)

    objects = TenantManager()
    tenancy = Tenancy("workspace", parents=("inbox",))

    class Meta:
        indexes = [
            # The announcement sweeper: emails not yet announced.
            models.Index(
                fields=["received_at"],
                name="email_unannounced",
                condition=models.Q(announced_at__isnull=True),
            ),
            # GET /inboxes/{id}/emails (newest first) and the drop_oldest policy (oldest first).
            models.Index(fields=["inbox", "-id"], name="email_inbox_list"),
            # GET /emails across a workspace, newest first.
            models.Index(fields=["workspace", "-id"], name="email_ws_list"),
            # /stats: a workspace's mail of the last 24 hours.
            models.Index(fields=["workspace", "received_at"], name="email_ws_received"),
            # ?since= and /wait: an inbox's mail received after a time.
            models.Index(fields=["inbox", "received_at"], name="email_inbox_received"),
            # ?unread=true: only unread rows are indexed.
            models.Index(
                fields=["inbox", "-id"], name="email_inbox_unread", condition=models.Q(read=False)
            ),
        ]

    def __str__(self) -> str:
        return f"{self.subject[:60]} ({self.id})"

    @property
    def plain_text(self) -> str:
        """The text body, or the HTML rendered to text when there is none."""
        return self.text or (html_to_text(self.html) if self.html else "")


class RawMessage(models.Model):
    """The message exactly as received, byte for byte; kept apart so lists never load it."""

    email = models.OneToOneField(
        Email, on_delete=models.CASCADE, primary_key=True, related_name="raw"
    )
    content = models.BinaryField()
    sha256 = models.CharField(max_length=64)

    objects = TenantManager()
    tenancy = Tenancy("email__workspace", parents=("email",))

    def __str__(self) -> str:
        return f"raw of {self.email_id}"


class Attachment(models.Model):
    id = models.CharField(primary_key=True, max_length=32, default=_att_id, editable=False)
    email = models.ForeignKey(Email, on_delete=models.CASCADE, related_name="attachments")
    position = models.PositiveIntegerField(default=0)
    filename = models.CharField(max_length=255, blank=True, default="")
    content_type = models.CharField(max_length=255, default="application/octet-stream")
    size = models.PositiveIntegerField(default=0)
    content_id = models.CharField(max_length=998, blank=True, default="")
    inline = models.BooleanField(default=False)
    # Either the decoded bytes, or (content null) where the encoded bytes lie in the raw message.
    content = models.BinaryField(null=True)
    raw_start = models.PositiveIntegerField(null=True)
    raw_end = models.PositiveIntegerField(null=True)
    transfer_encoding = models.CharField(max_length=32, blank=True, default="")

    objects = TenantManager()
    tenancy = Tenancy("email__workspace", parents=("email",))

    class Meta:
        ordering = ["email", "position"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(content__isnull=False)
                | models.Q(raw_start__isnull=False, raw_end__isnull=False),
                name="attachment_bytes_or_span",
            )
        ]

    def __str__(self) -> str:
        return self.filename or self.id

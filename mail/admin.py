"""Operator admin for emails, raw messages and attachments: for looking, not for changing.

Emails are written by the receive pipeline, which keeps the inbox counters and the event log in
step; the admin neither adds, edits nor deletes them (PATCH and DELETE /emails/{id} do). Raw
messages and attachment bytes are never rendered: the admin shows their size and checksum.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.db.models.functions import Length
from django.http import HttpRequest
from django.template.defaultfilters import filesizeformat

from config.admin import ReadOnlyAdmin
from mail.models import Attachment, Email, RawMessage


class AttachmentInline(admin.TabularInline):
    model = Attachment
    extra = 0
    can_delete = False
    fields = ["id", "filename", "content_type", "size", "inline", "content_id"]
    readonly_fields = fields

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def get_queryset(self, request: HttpRequest) -> QuerySet[Attachment]:
        return super().get_queryset(request).defer("content")


@admin.register(Email)
class EmailAdmin(ReadOnlyAdmin):
    list_display = [
        "subject",
        "id",
        "from_address",
        "inbox",
        "code",
        "read",
        "starred",
        "has_attachments",
        "size",
        "received_at",
    ]
    list_filter = ["read", "starred", "has_attachments"]
    list_select_related = ["inbox"]
    search_fields = ["id", "subject", "from_address", "inbox__address", "message_id"]
    exclude = ["search_text"]
    readonly_fields = ["id", "raw_message"]
    date_hierarchy = "received_at"
    ordering = ["-received_at"]
    list_per_page = 50
    inlines = [AttachmentInline]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Email]:
        # Lists show a few columns; the bodies load only on an email's own page.
        return super().get_queryset(request).defer("text", "html", "headers", "search_text")

    @admin.display(description="code")
    def code(self, email: Email) -> str:
        return (email.extracted or {}).get("code") or ""

    @admin.display(description="raw message")
    def raw_message(self, email: Email) -> str:
        row = (
            RawMessage.objects.filter(email_id=email.pk)
            .annotate(n=Length("content"))
            .values_list("n", "sha256")
            .first()
        )
        if row is None:
            return "none stored"
        return f"{filesizeformat(row[0])} ({row[0]} bytes), sha256 {row[1]}"


@admin.register(RawMessage)
class RawMessageAdmin(ReadOnlyAdmin):
    list_display = ["email_id", "size", "sha256"]
    search_fields = ["email__id", "sha256"]
    fields = ["email_id", "size", "sha256"]
    readonly_fields = fields
    date_hierarchy = "email__received_at"
    ordering = ["-email__received_at"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[RawMessage]:
        # The bytes are never loaded, only measured by the database.
        return super().get_queryset(request).defer("content").annotate(n=Length("content"))

    @admin.display(description="size", ordering="n")
    def size(self, raw: RawMessage) -> str:
        return f"{raw.n} bytes"  # type: ignore[attr-defined]


@admin.register(Attachment)
class AttachmentAdmin(ReadOnlyAdmin):
    list_display = ["filename", "id", "email_id", "content_type", "size", "inline"]
    list_filter = ["inline", "content_type"]
    search_fields = ["id", "filename", "email__id", "content_type"]
    fields = [
        "id",
        "email_id",
        "position",
        "filename",
        "content_type",
        "size",
        "content_id",
        "inline",
    ]
    readonly_fields = fields
    date_hierarchy = "email__received_at"
    ordering = ["-email__received_at", "position"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Attachment]:
        return super().get_queryset(request).defer("content")

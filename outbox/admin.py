"""Operator admin for outgoing mail: for looking, not for deciding.

Decisions go through POST /outbox/{id}/decision or the Approvals page (the state machine, its
events and the waiters live in ``outbox.services``), so the admin changes nothing. The MIME
message as sent is shown as its size only.
"""

from __future__ import annotations

from django.contrib import admin
from django.db.models import QuerySet
from django.db.models.functions import Length
from django.http import HttpRequest

from config.admin import ReadOnlyAdmin
from outbox.models import OutboxItem


@admin.register(OutboxItem)
class OutboxItemAdmin(ReadOnlyAdmin):
    list_display = [
        "subject",
        "id",
        "status",
        "kind",
        "from_address",
        "to",
        "inbox",
        "approval_required",
        "delivery",
        "attempts",
        "created_at",
        "sent_at",
    ]
    list_filter = ["status", "kind", "delivery", "approval_required"]
    list_select_related = ["inbox", "decided_by"]
    search_fields = ["id", "subject", "from_address", "inbox__address", "message_id"]
    exclude = ["raw", "request_hash"]
    readonly_fields = ["id", "raw_size", "created_at"]
    date_hierarchy = "created_at"
    ordering = ["-created_at"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[OutboxItem]:
        return (
            super()
            .get_queryset(request)
            .defer("raw", "text", "html")
            .annotate(raw_bytes=Length("raw"))
        )

    @admin.display(description="message as sent")
    def raw_size(self, item: OutboxItem) -> str:
        size = getattr(item, "raw_bytes", None) or 0
        return f"{size} bytes" if size else "not built yet"

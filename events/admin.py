"""Operator admin for the event log: read-only, since only ``emit()`` writes it."""

from __future__ import annotations

from django.contrib import admin

from config.admin import ReadOnlyAdmin
from events.models import Event


@admin.register(Event)
class EventAdmin(ReadOnlyAdmin):
    list_display = ["id", "type", "workspace_id", "inbox_id", "prev_id", "created_at"]
    list_filter = ["type"]
    search_fields = ["=id", "workspace_id", "inbox_id", "type"]
    readonly_fields = ["id", "created_at"]
    date_hierarchy = "created_at"
    ordering = ["-id"]

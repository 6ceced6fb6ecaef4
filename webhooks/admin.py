"""Operator admin for the event log."""

from __future__ import annotations

from django.contrib import admin

from webhooks.models import Event


@admin.register(Event)
class EventAdmin(admin.ModelAdmin):
    list_display = ["id", "type", "workspace_id", "inbox_id", "created_at"]
    list_filter = ["type"]
    search_fields = ["workspace_id", "inbox_id"]
    readonly_fields = ["id", "type", "workspace_id", "inbox_id", "data", "created_at"]

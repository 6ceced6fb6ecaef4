"""Operator admin for the event log."""

from __future__ import annotations

from django.contrib import admin

from webhooks.models import Attempt, Delivery, Endpoint, Event


@admin.register(Event)
class EventAdmin(admin.ModelAdmin):
    list_display = ["id", "type", "workspace_id", "inbox_id", "created_at"]
    list_filter = ["type"]
    search_fields = ["workspace_id", "inbox_id"]
    readonly_fields = ["id", "type", "workspace_id", "inbox_id", "data", "created_at"]


class AttemptInline(admin.TabularInline):
    model = Attempt
    extra = 0
    can_delete = False
    readonly_fields = ["at", "status_code", "duration_ms", "error", "response_excerpt"]


@admin.register(Endpoint)
class EndpointAdmin(admin.ModelAdmin):
    list_display = ["url", "id", "workspace", "events", "enabled", "created_at"]
    list_filter = ["enabled"]
    search_fields = ["url", "id", "workspace__name"]
    exclude = ["secret_encrypted"]


@admin.register(Delivery)
class DeliveryAdmin(admin.ModelAdmin):
    list_display = ["id", "event", "endpoint", "status", "attempt_count", "next_attempt_at"]
    list_filter = ["status", "event"]
    search_fields = ["id", "endpoint__url", "workspace_id"]
    readonly_fields = [
        "id",
        "endpoint",
        "workspace_id",
        "event_id",
        "event",
        "body",
        "status",
        "attempt_count",
        "next_attempt_at",
        "leased_until",
        "created_at",
    ]
    inlines = [AttemptInline]

"""Operator admin for webhook endpoints, deliveries and attempts.

The signing secret is stored encrypted and never shown, not even as ciphertext; endpoints are
created by POST /webhooks or the dashboard, which hand the secret out once. The delivery log is
written by the fan-out and the workers only, so it is read-only here.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db import models
from django.http import HttpRequest

from apikeys import audit
from apikeys.admin import AuditedAdmin
from config.admin import ReadOnlyAdmin
from webhooks.models import Attempt, Delivery, Endpoint


class AttemptInline(admin.TabularInline):
    model = Attempt
    extra = 0
    can_delete = False
    readonly_fields = ["at", "status_code", "duration_ms", "error", "response_excerpt"]

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Endpoint)
class EndpointAdmin(AuditedAdmin):
    list_display = ["url", "id", "workspace", "events", "enabled", "created_at"]
    list_filter = ["enabled"]
    list_select_related = ["workspace"]
    search_fields = ["url", "id", "workspace__name", "workspace__id"]
    # Never the secret, not even encrypted.
    exclude = ["secret_encrypted"]
    formfield_overrides = {models.URLField: {"assume_scheme": "https"}}
    readonly_fields = ["id", "workspace", "created_at", "updated_at"]
    date_hierarchy = "created_at"
    ordering = ["-created_at"]
    audit_type = "webhook"
    audit_actions = {"change": "webhook.updated", "delete": "webhook.deleted"}

    def audit_name(self, obj: Endpoint) -> str:  # type: ignore[override]
        return audit.url_origin(obj.url)

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # the secret is generated and shown once by POST /webhooks


@admin.register(Delivery)
class DeliveryAdmin(ReadOnlyAdmin):
    list_display = [
        "id",
        "event",
        "endpoint",
        "status",
        "attempt_count",
        "next_attempt_at",
        "created_at",
    ]
    list_filter = ["status", "event"]
    list_select_related = ["endpoint"]
    search_fields = ["id", "endpoint__url", "endpoint__id", "workspace_id"]
    readonly_fields = ["id", "created_at", "updated_at"]
    date_hierarchy = "created_at"
    ordering = ["-created_at"]
    inlines = [AttemptInline]


@admin.register(Attempt)
class AttemptAdmin(ReadOnlyAdmin):
    list_display = ["delivery", "at", "status_code", "duration_ms", "error"]
    list_filter = ["status_code"]
    list_select_related = ["delivery"]
    search_fields = ["delivery__id", "error"]
    date_hierarchy = "at"
    ordering = ["-at"]

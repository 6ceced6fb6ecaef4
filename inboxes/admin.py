"""Operator admin for domains and inboxes.

Inboxes are created by the API, the dashboard or catch-all delivery (``inbox_create`` emits
``inbox.created``), so the admin does not add them; it edits an inbox's settings, never its
address or the counters the mail services maintain.
"""

from __future__ import annotations

from django.contrib import admin
from django.db.models import Q, QuerySet
from django.http import HttpRequest
from django.utils import timezone

from inboxes.models import Domain, Inbox


@admin.register(Domain)
class DomainAdmin(admin.ModelAdmin):
    list_display = ["domain", "id", "workspace", "catch_all", "created_at"]
    list_filter = ["catch_all"]
    list_select_related = ["workspace"]
    search_fields = ["domain", "id", "workspace__name", "workspace__id"]
    autocomplete_fields = ["workspace"]
    readonly_fields = ["id", "created_at"]
    date_hierarchy = "created_at"
    ordering = ["domain"]


class InboxStatusFilter(admin.SimpleListFilter):
    title = "status"
    parameter_name = "status"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list[tuple[str, str]]:
        return [("active", "active"), ("expired", "expired"), ("permanent", "permanent")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Inbox]) -> QuerySet[Inbox]:
        now = timezone.now()
        if self.value() == "active":
            return queryset.filter(Q(expires_at__isnull=True) | Q(expires_at__gt=now))
        if self.value() == "expired":
            return queryset.filter(expires_at__lte=now)
        if self.value() == "permanent":
            return queryset.filter(expires_at__isnull=True)
        return queryset


@admin.register(Inbox)
class InboxAdmin(admin.ModelAdmin):
    list_display = [
        "address",
        "id",
        "workspace",
        "status",
        "agent_name",
        "email_count",
        "unread_count",
        "expires_at",
        "source",
        "created_at",
    ]
    list_filter = [InboxStatusFilter, "source", "overflow"]
    list_select_related = ["workspace"]
    search_fields = ["address", "id", "name", "agent_name", "workspace__name", "workspace__id"]
    readonly_fields = [
        "id",
        "workspace",
        "address",
        "local_part",
        "domain",
        "source",
        "email_count",
        "unread_count",
        "last_email_at",
        "expiry_notified_at",
        "created_at",
        "updated_at",
    ]
    date_hierarchy = "created_at"
    ordering = ["-created_at"]

    @admin.display(description="status")
    def status(self, inbox: Inbox) -> str:
        return inbox.status

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # through POST /inboxes or the dashboard, which emit inbox.created

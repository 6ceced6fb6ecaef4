"""Operator admin for domains and inboxes.

Inboxes are created by the API, the dashboard or catch-all delivery (``inbox_create`` emits
``inbox.created``), so the admin does not add them; it edits an inbox's settings, never its
address or the counters the mail services maintain.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import Q, QuerySet
from django.http import HttpRequest
from django.utils import timezone

from apikeys.models import effective_scopes
from apikeys.principal import Principal
from inboxes.models import Domain, Inbox
from inboxes.services import OPERATOR_ROLE, inbox_update


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
        "forward_set_via",
        "forward_set_by_key",
        "forward_set_by_user",
        "forward_requires_approval",
        "created_at",
        "updated_at",
    ]
    date_hierarchy = "created_at"
    ordering = ["-created_at"]

    def save_model(self, request: HttpRequest, obj: Inbox, form: Any, change: bool) -> None:
        """A changed ``forward_to`` goes through the service, with the operator as its setter
        (copies then follow the workspace's approval setting)."""
        if change and "forward_to" in form.changed_data:
            forward_to = obj.forward_to or None
            obj.forward_to = form.initial.get("forward_to")
            super().save_model(request, obj, form, change)
            operator = Principal(
                workspace=obj.workspace,
                scopes=effective_scopes(["admin"]),
                user=request.user,
                role=OPERATOR_ROLE,
            )
            inbox_update(inbox=obj, principal=operator, forward_to=forward_to)
            return
        super().save_model(request, obj, form, change)

    @admin.display(description="status")
    def status(self, inbox: Inbox) -> str:
        return inbox.status

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # through POST /inboxes or the dashboard, which emit inbox.created

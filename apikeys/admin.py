"""Operator admin for workspaces, members and keys. Plain keys are never stored, never shown."""

from __future__ import annotations

from django.contrib import admin

from apikeys.models import ApiKey, Membership, Workspace


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    autocomplete_fields = ["user"]


@admin.register(Workspace)
class WorkspaceAdmin(admin.ModelAdmin):
    list_display = [
        "name",
        "id",
        "require_approval",
        "allow_permanent_inboxes",
        "max_inboxes",
        "classifier_enabled",
        "created_at",
    ]
    search_fields = ["name", "id"]
    list_filter = ["require_approval", "classifier_enabled"]
    inlines = [MembershipInline]


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ["user", "workspace", "role", "created_at"]
    list_filter = ["role"]
    search_fields = ["user__username", "workspace__name", "workspace__id"]
    autocomplete_fields = ["user", "workspace"]


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    list_display = [
        "name",
        "id",
        "workspace",
        "kind",
        "scopes",
        "prefix",
        "require_approval",
        "expires_at",
        "last_used_at",
        "revoked_at",
    ]
    list_filter = ["kind", "require_approval"]
    search_fields = ["name", "id", "prefix", "workspace__name"]
    readonly_fields = ["id", "prefix", "last_used_at", "created_at", "created_by"]
    exclude = ["digest"]

    def has_add_permission(self, request) -> bool:  # type: ignore[no-untyped-def]
        return False  # plain keys are minted by POST /keys or `manage.py createkey`

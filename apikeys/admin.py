"""Operator admin for workspaces, members, invitations and keys.

Plain keys are never stored and key digests are never shown (the ``digest`` field is excluded);
keys are minted by POST /keys or ``manage.py createkey``, revoked here through the same service.
Invitations are made on a workspace's members page (the only place their link is shown); here
they are read and withdrawn. The admin is the operator's console: a superuser may still set any
user's password or add a membership directly, as the operator of the installation.
"""

from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from apikeys import services
from apikeys.audit import actor_of
from apikeys.models import ApiKey, AuditEntry, Invitation, Membership, Workspace
from config.admin import ReadOnlyAdmin


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
        "expired_inbox_grace_hours",
        "email_retention_days",
        "created_at",
    ]
    search_fields = ["name", "id"]
    list_filter = ["require_approval", "classifier_enabled", "allow_permanent_inboxes"]
    readonly_fields = ["id", "created_at"]
    date_hierarchy = "created_at"
    ordering = ["name"]
    inlines = [MembershipInline]


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ["user", "workspace", "role", "created_at"]
    list_filter = ["role"]
    list_select_related = ["user", "workspace"]
    search_fields = ["user__username", "workspace__name", "workspace__id"]
    autocomplete_fields = ["user", "workspace"]
    readonly_fields = ["created_at"]
    date_hierarchy = "created_at"
    ordering = ["workspace__name", "user__username"]


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
    list_filter = ["kind", "require_approval", ("revoked_at", admin.EmptyFieldListFilter)]
    list_select_related = ["workspace", "created_by"]
    search_fields = ["name", "id", "prefix", "workspace__name", "workspace__id"]
    readonly_fields = [
        "id",
        "workspace",
        "prefix",
        "scopes",
        "last_used_at",
        "created_at",
        "created_by",
    ]
    # The digest of the secret is never shown, not even read-only.
    exclude = ["digest"]
    date_hierarchy = "created_at"
    ordering = ["-created_at"]
    actions = ["revoke"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # plain keys are minted by POST /keys or `manage.py createkey`

    @admin.action(description="Revoke the selected keys")
    def revoke(self, request: HttpRequest, queryset: QuerySet[ApiKey]) -> None:
        revoked = 0
        for key in queryset.filter(revoked_at__isnull=True):
            services.api_key_revoke(key=key, by=actor_of(request))
            revoked += 1
        self.message_user(request, f"Revoked {revoked} key(s).", messages.SUCCESS)


@admin.register(Invitation)
class InvitationAdmin(admin.ModelAdmin):
    list_display = ["email", "workspace", "role", "invited_by", "created_at", "expires_at"]
    list_filter = [
        "role",
        ("accepted_at", admin.EmptyFieldListFilter),
        ("revoked_at", admin.EmptyFieldListFilter),
    ]
    list_select_related = ["workspace", "invited_by"]
    search_fields = ["email", "workspace__name", "workspace__id"]
    # The digest of the link's secret is never shown, and nothing here can change who is let in.
    exclude = ["digest"]
    readonly_fields = [
        "workspace",
        "email",
        "role",
        "prefix",
        "invited_by",
        "created_at",
        "expires_at",
        "accepted_at",
        "accepted_by",
        "revoked_at",
    ]
    date_hierarchy = "created_at"
    ordering = ["-created_at"]
    actions = ["withdraw"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # made on the members page, which shows the link once

    @admin.action(description="Withdraw the selected invitations")
    def withdraw(self, request: HttpRequest, queryset: QuerySet[Invitation]) -> None:
        count = 0
        for invitation in queryset.filter(accepted_at__isnull=True, revoked_at__isnull=True):
            services.invitation_withdraw(invitation=invitation, by=actor_of(request))
            count += invitation.revoked_at is not None
        self.message_user(request, f"Withdrew {count} invitation(s).", messages.SUCCESS)


@admin.register(AuditEntry)
class AuditEntryAdmin(ReadOnlyAdmin):
    """Read-only: the log is append-only (``apikeys.audit``); only its retention sweep deletes."""

    list_display = [
        "created_at",
        "workspace",
        "action",
        "actor_type",
        "actor_name",
        "target_name",
        "ip",
    ]
    list_filter = ["action", "actor_type"]
    search_fields = ["actor_name", "actor_id", "target_name", "target_id", "ip"]
    date_hierarchy = "created_at"
    ordering = ["-id"]
    fields = readonly_fields = [
        "id",
        "created_at",
        "workspace",
        "actor_type",
        "actor_id",
        "actor_name",
        "action",
        "target_type",
        "target_id",
        "target_name",
        "changes",
        "ip",
    ]

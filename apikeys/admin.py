"""Operator admin for workspaces, members, invitations and keys.

Plain keys are never stored and key digests are never shown (the ``digest`` field is excluded);
keys are minted by POST /keys or ``manage.py createkey``, revoked here through the same service.
Invitations are made on a workspace's members page (the only place their link is shown); here
they are read and withdrawn. The admin is the operator's console: a superuser may still set any
user's password or add a membership directly, as the operator of the installation.

Every add, change and delete the operator makes here of something the audit log follows (keys,
members, workspace settings, domains, labels, webhook endpoints, inboxes) leaves its entry, as
the same change through the API or the dashboard does: :class:`AuditedAdmin` (the admin saves
and deletes in one transaction, so the entry commits with the change), the workspace page's
member rows through :meth:`WorkspaceAdmin.save_formset`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import Model, QuerySet
from django.http import HttpRequest

from apikeys import audit, services
from apikeys.audit import actor_of
from apikeys.models import ApiKey, AuditEntry, Invitation, Membership, Workspace
from config.admin import ReadOnlyAdmin


def _value(value: Any) -> Any:
    return value.pk if isinstance(value, Model) else value


def form_changes(form: forms.ModelForm, change: bool) -> dict[str, dict[str, Any]]:
    """What the admin form changed, as ``apikeys.audit`` takes it (``record`` keeps only the
    target type's allow-listed fields)."""
    if not change:
        return {f: {"after": _value(form.cleaned_data.get(f))} for f in form.changed_data}
    changes = {
        f: {"before": _value(form.initial.get(f)), "after": _value(form.cleaned_data.get(f))}
        for f in form.changed_data
    }
    # A JSON field's text is "changed" whenever its formatting differs: keep real changes only.
    return {f: c for f, c in changes.items() if c["before"] != c["after"]}


class AuditedAdmin(admin.ModelAdmin):
    """An admin whose adds, changes and deletes are audited with the signed-in operator as the
    actor. ``audit_type`` is the target type (``apikeys.audit.FIELDS``); ``audit_actions`` maps
    ``add``, ``change`` and ``delete`` to the action recorded (one left out is not an operator's
    change the log follows)."""

    audit_type = ""
    audit_actions: Mapping[str, str] = {}

    def audit_workspace(self, obj: Any) -> str | None:
        return obj.workspace_id

    def audit_name(self, obj: Any) -> str:
        return str(obj)

    def audit(self, request: HttpRequest, obj: Any, what: str, changes: dict | None = None) -> None:
        action = self.audit_actions.get(what)
        if action is None:
            return
        audit.record(
            workspace=self.audit_workspace(obj),
            by=actor_of(request),
            action=action,
            target=audit.Target(self.audit_type, str(obj.pk), self.audit_name(obj)),
            changes=changes,
        )

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        super().save_model(request, obj, form, change)
        self.audit(request, obj, "change" if change else "add", form_changes(form, change))

    def delete_model(self, request: HttpRequest, obj: Any) -> None:
        self.audit(request, obj, "delete")
        super().delete_model(request, obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet) -> None:
        for obj in queryset:
            self.audit(request, obj, "delete")
        super().delete_queryset(request, queryset)


def _member_name(membership: Membership) -> str:
    return membership.user.get_username()


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    autocomplete_fields = ["user"]


@admin.register(Workspace)
class WorkspaceAdmin(AuditedAdmin):
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
    # A workspace added here has no log yet; one deleted here takes its log with it.
    audit_type, audit_actions = "workspace", {"change": "workspace.updated"}

    def audit_workspace(self, obj: Any) -> str | None:
        return obj.pk

    def audit_name(self, obj: Any) -> str:
        return obj.name

    def save_formset(self, request: HttpRequest, form: Any, formset: Any, change: bool) -> None:
        """The member rows of the workspace's page: added, re-roled and removed members are
        audited as on the members page."""
        if formset.model is not Membership:
            super().save_formset(request, form, formset, change)
            return
        before = {f.instance.pk: f.initial.get("role") for f in formset.initial_forms}
        removed = [
            (f.instance.pk, _member_name(f.instance))
            for f in formset.deleted_forms
            if f.instance.pk
        ]
        super().save_formset(request, form, formset, change)
        by = actor_of(request)
        workspace = form.instance.pk
        for pk, name in removed:
            target = audit.Target("member", str(pk), name)
            audit.record(workspace=workspace, by=by, action="member.removed", target=target)
        for row in formset.new_objects:
            target = audit.Target("member", str(row.pk), _member_name(row))
            changes = {"role": {"after": row.role}}
            audit.record(
                workspace=workspace, by=by, action="member.added", target=target, changes=changes
            )
        for row, fields in formset.changed_objects:
            if "role" not in fields:
                continue
            target = audit.Target("member", str(row.pk), _member_name(row))
            changes = {"role": {"before": before.get(row.pk), "after": row.role}}
            audit.record(
                workspace=workspace,
                by=by,
                action="member.role_changed",
                target=target,
                changes=changes,
            )


@admin.register(Membership)
class MembershipAdmin(AuditedAdmin):
    list_display = ["user", "workspace", "role", "created_at"]
    list_filter = ["role"]
    list_select_related = ["user", "workspace"]
    search_fields = ["user__username", "workspace__name", "workspace__id"]
    autocomplete_fields = ["user", "workspace"]
    readonly_fields = ["created_at"]
    date_hierarchy = "created_at"
    ordering = ["workspace__name", "user__username"]
    audit_type = "member"
    audit_actions = {
        "add": "member.added",
        "change": "member.role_changed",
        "delete": "member.removed",
    }

    def audit_name(self, obj: Any) -> str:
        return _member_name(obj)


@admin.register(ApiKey)
class ApiKeyAdmin(AuditedAdmin):
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
    audit_type, audit_actions = "key", {"change": "key.updated", "delete": "key.revoked"}

    def audit_name(self, obj: Any) -> str:
        return obj.name

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

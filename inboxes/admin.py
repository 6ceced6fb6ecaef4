"""Operator admin for domains and inboxes.

Custom domains follow the same name rules as everywhere (never a shared domain or a
subdomain of one); ticking ``verified`` vouches for a domain without DNS, an operator's call.
Inboxes are created by the API, the dashboard or catch-all delivery (``inbox_create`` emits
``inbox.created``), so the admin does not add them; it edits an inbox's settings, never its
address or the counters the mail services maintain.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db import IntegrityError, transaction
from django.db.models import Q, QuerySet
from django.http import HttpRequest
from django.utils import timezone

from apikeys.admin import AuditedAdmin
from apikeys.audit import actor_of
from apikeys.models import effective_scopes
from apikeys.principal import Principal
from config.api.errors import ApiError
from inboxes import services
from inboxes.models import Domain, Inbox, SmtpCredential
from inboxes.services import OPERATOR_ROLE, inbox_delete, inbox_update


class DomainAdminForm(forms.ModelForm):
    """The same name rules as the dashboard and ``bootstrap --domain`` (services)."""

    class Meta:
        model = Domain
        fields = ["workspace", "domain", "catch_all", "verified"]

    def clean_domain(self) -> str:
        try:
            return services.domain_name_clean(self.cleaned_data["domain"])
        except ApiError as error:
            raise forms.ValidationError(error.message) from None


@admin.register(Domain)
class DomainAdmin(AuditedAdmin):
    form = DomainAdminForm
    audit_type = "domain"
    audit_actions = {"add": "domain.added", "change": "domain.updated", "delete": "domain.removed"}
    list_display = [
        "domain",
        "id",
        "workspace",
        "verified",
        "catch_all",
        "last_check_result",
        "last_checked_at",
        "created_at",
    ]
    list_filter = ["verified", "catch_all", "last_check_result"]
    list_select_related = ["workspace"]
    search_fields = ["domain", "id", "workspace__name", "workspace__id"]
    autocomplete_fields = ["workspace"]
    readonly_fields = [
        "id",
        "verification_record",
        "verified_at",
        "last_checked_at",
        "last_check_result",
        "last_check_detail",
        "failed_checks",
        "created_at",
    ]
    date_hierarchy = "created_at"
    ordering = ["domain"]
    actions = ["check_now"]

    @admin.display(description="TXT record to publish")
    def verification_record(self, domain: Domain) -> str:
        return f"{domain.record_name} TXT {domain.record_value}" if domain.pk else "-"

    def save_model(
        self, request: HttpRequest, obj: Domain, form: forms.ModelForm, change: bool
    ) -> None:
        if "verified" in form.changed_data and obj.verified:
            # The operator vouches for it: no DNS proof on record, so a missing record never
            # takes it away (see the model); a later check that finds the record proves it.
            obj.verified_at, obj.failed_checks = None, 0
        try:
            with transaction.atomic():
                super().save_model(request, obj, form, change)
        except IntegrityError:
            obj.verified = False
            super().save_model(request, obj, form, change)
            self.message_user(
                request,
                f"{obj.domain} is verified by another workspace; saved unverified.",
                messages.WARNING,
            )

    @admin.action(description="Check the TXT record now")
    def check_now(self, request: HttpRequest, queryset: QuerySet[Domain]) -> None:
        for domain in queryset:
            row = services.domain_check(domain=domain)
            level = messages.SUCCESS if row.verified else messages.WARNING
            state = "verified" if row.verified else "not verified"
            self.message_user(request, f"{row.domain}: {state}. {row.last_check_detail}", level)


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
        # Fault rules reach the SMTP wire: set through the API's or the dashboard's validation.
        "smtp_faults",
        "injected_faults",
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

    def delete_model(self, request: HttpRequest, obj: Inbox) -> None:
        """Through the service, as DELETE /inboxes/{id}: audited, the event log forgotten."""
        inbox_delete(inbox=obj, by=actor_of(request))

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Inbox]) -> None:
        for inbox in queryset:
            inbox_delete(inbox=inbox, by=actor_of(request))


@admin.register(SmtpCredential)
class SmtpCredentialAdmin(admin.ModelAdmin):
    """Sandbox SMTP credentials: seen and revoked here, made only by the API or the dashboard
    (the password is shown once, there); the digest is never shown."""

    list_display = ["username", "id", "inbox", "workspace", "name", "last_used_at", "revoked_at"]
    list_filter = [("revoked_at", admin.EmptyFieldListFilter)]
    list_select_related = ["inbox", "workspace"]
    search_fields = ["username", "id", "name", "inbox__address", "workspace__name"]
    exclude = ["digest"]
    readonly_fields = ["id", "workspace", "inbox", "name", "username", "created_at"]
    readonly_fields += ["last_used_at", "revoked_at"]
    date_hierarchy = "created_at"
    ordering = ["-created_at"]
    actions = ["revoke"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # POST /inboxes/{id}/smtp-credentials or the inbox's page

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # revoked (audited), never deleted: the row says when

    @admin.action(description="Revoke the selected SMTP credentials")
    def revoke(self, request: HttpRequest, queryset: QuerySet[SmtpCredential]) -> None:
        for credential in queryset.filter(revoked_at__isnull=True):
            services.smtp_credential_revoke(credential=credential, by=actor_of(request))
        messages.success(request, "Revoked.")

"""Operator admin for labels, the labels on emails and the classifier's training examples."""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest

from apikeys.admin import AuditedAdmin
from labels.models import EmailLabel, Label, LabelFeedback


@admin.register(Label)
class LabelAdmin(AuditedAdmin):
    list_display = ["key", "name", "workspace", "color", "threshold", "enabled", "created_at"]
    list_filter = ["enabled", "color"]
    list_select_related = ["workspace"]
    search_fields = ["key", "name", "id", "workspace__name", "workspace__id"]
    # Rules and threshold are validated by the labels service (PATCH /labels/{key}); the admin
    # edits only what needs no validation.
    readonly_fields = ["id", "workspace", "key", "rules", "threshold", "created_at", "updated_at"]
    date_hierarchy = "created_at"
    ordering = ["workspace__name", "key"]
    audit_type, audit_actions = "label", {"change": "label.updated", "delete": "label.deleted"}

    def audit_name(self, obj: Label) -> str:  # type: ignore[override]
        return obj.key

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # POST /labels validates keys and rules


@admin.register(EmailLabel)
class EmailLabelAdmin(admin.ModelAdmin):
    # ``email_id``, not the email: its __str__ would load every listed email's bodies.
    list_display = ["key", "email_id", "source", "confidence", "created_at"]
    list_filter = ["source"]
    search_fields = ["key", "email__id", "label__id"]
    raw_id_fields = ["email", "label"]
    readonly_fields = ["email", "label", "key", "source", "confidence", "created_at"]
    date_hierarchy = "created_at"
    ordering = ["-id"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # PATCH /emails/{id} sets manual labels (and records feedback)


@admin.register(LabelFeedback)
class LabelFeedbackAdmin(admin.ModelAdmin):
    list_display = ["label", "email_id", "positive", "from_address", "subject", "created_at"]
    list_filter = ["positive"]
    list_select_related = ["label"]
    search_fields = ["label__key", "email_id", "from_address", "subject"]
    readonly_fields = [
        "label",
        "email_id",
        "positive",
        "from_address",
        "from_name",
        "subject",
        "text",
        "created_at",
    ]
    date_hierarchy = "created_at"
    ordering = ["-id"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # examples come from people's label decisions

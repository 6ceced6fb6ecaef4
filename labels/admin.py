"""Operator admin for labels."""

from __future__ import annotations

from django.contrib import admin

from labels.models import EmailLabel, Label


@admin.register(Label)
class LabelAdmin(admin.ModelAdmin):
    list_display = ["key", "name", "workspace", "color", "threshold", "enabled"]
    list_filter = ["enabled", "color"]
    search_fields = ["key", "name", "workspace__name"]


@admin.register(EmailLabel)
class EmailLabelAdmin(admin.ModelAdmin):
    list_display = ["key", "email", "source", "confidence", "created_at"]
    list_filter = ["source"]
    search_fields = ["key", "email__id"]
    raw_id_fields = ["email", "label"]

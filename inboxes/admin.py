"""Operator admin for domains and inboxes."""

from __future__ import annotations

from django.contrib import admin

from inboxes.models import Domain


@admin.register(Domain)
class DomainAdmin(admin.ModelAdmin):
    list_display = ["domain", "workspace", "catch_all", "created_at"]
    list_filter = ["catch_all"]
    search_fields = ["domain", "workspace__name", "workspace__id"]
    autocomplete_fields = ["workspace"]

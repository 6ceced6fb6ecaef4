"""Request and response shapes of /inboxes and /domains."""

from __future__ import annotations

from rest_framework import serializers


class DomainOut(serializers.Serializer):
    domain = serializers.CharField()
    shared = serializers.BooleanField(help_text="Offered to every workspace by this instance.")
    catch_all = serializers.BooleanField(
        help_text="Mail to an unknown local part creates the inbox (custom domains only)."
    )
    default = serializers.BooleanField(help_text="Used when POST /inboxes names no domain.")

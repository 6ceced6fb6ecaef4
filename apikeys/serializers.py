"""Request and response shapes of /keys and /me."""

from __future__ import annotations

from rest_framework import serializers

from apikeys.models import KeyKind, Scope
from config.api.inputs import JsonIn
from config.api.query import PageQuery


class KeyListQuery(PageQuery):
    default_limit = 50
    max_limit = 200


class KeyCreateIn(JsonIn):
    name = serializers.CharField(max_length=200)
    kind = serializers.ChoiceField(choices=KeyKind.choices, default=KeyKind.AGENT)
    scopes = serializers.ListField(
        child=serializers.ChoiceField(choices=Scope.choices),
        min_length=1,
        default=lambda: ["read", "write"],
    )
    expires_in_days = serializers.IntegerField(
        min_value=1, max_value=3650, allow_null=True, default=None
    )
    require_approval = serializers.BooleanField(default=False)


class KeyUpdateIn(JsonIn):
    require_approval = serializers.BooleanField()


class KeyOut(serializers.Serializer):
    id = serializers.CharField()
    name = serializers.CharField()
    kind = serializers.ChoiceField(choices=KeyKind.choices)
    scopes = serializers.ListField(child=serializers.ChoiceField(choices=Scope.choices))
    prefix = serializers.CharField(help_text="The first characters of the key, to recognise it.")
    require_approval = serializers.BooleanField()
    expires_at = serializers.DateTimeField(allow_null=True)
    last_used_at = serializers.DateTimeField(allow_null=True)
    created_at = serializers.DateTimeField()


class KeyCreatedOut(KeyOut):
    key = serializers.CharField(help_text="The plain key. Shown in this response only.")


class MeKeyOut(serializers.Serializer):
    id = serializers.CharField()
    name = serializers.CharField()
    kind = serializers.CharField()
    scopes = serializers.ListField(child=serializers.CharField())
    require_approval = serializers.BooleanField()
    expires_at = serializers.DateTimeField(allow_null=True)


class MeUserOut(serializers.Serializer):
    id = serializers.IntegerField()
    email = serializers.CharField()
    role = serializers.CharField()


class MeWorkspaceOut(serializers.Serializer):
    id = serializers.CharField()
    name = serializers.CharField()
    require_approval = serializers.BooleanField()


class EntitlementsOut(serializers.Serializer):
    permanent_inboxes = serializers.BooleanField()
    max_inboxes = serializers.IntegerField(allow_null=True)
    classifier = serializers.BooleanField()
    send = serializers.BooleanField()
    rate_limit_per_minute = serializers.IntegerField()


class MeOut(serializers.Serializer):
    type = serializers.ChoiceField(choices=["api_key", "session"])
    key = MeKeyOut(required=False)
    user = MeUserOut(required=False)
    scopes = serializers.ListField(child=serializers.CharField(), help_text="Effective scopes.")
    workspace = MeWorkspaceOut()
    entitlements = EntitlementsOut()

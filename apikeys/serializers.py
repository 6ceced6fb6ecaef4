"""Request and response shapes of /keys and /me."""

from __future__ import annotations

from rest_framework import serializers

from apikeys.models import AuditEntry, KeyKind, Scope
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


class AuditListQuery(PageQuery):
    default_limit = 50
    max_limit = 200

    actor = serializers.CharField(
        required=False,
        max_length=64,
        help_text="Only entries by this actor: a key id (`key_…`), a user id, or `system` "
        "(the operator's commands) or `anonymous` (failed sign-ins).",
    )
    action = serializers.CharField(
        required=False,
        max_length=64,
        help_text="Only this action (`key.created`), or every action of a kind when it ends "
        "with a dot (`key.`).",
    )
    since = serializers.DateTimeField(
        required=False, help_text="Only entries at or after this time (ISO 8601)."
    )
    until = serializers.DateTimeField(
        required=False, help_text="Only entries before this time (ISO 8601)."
    )


class AuditActorOut(serializers.Serializer):
    type = serializers.ChoiceField(
        choices=["key", "user", "system", "anonymous"],
        help_text="`key`: an API key; `user`: a person signed in to the dashboard; `system`: the "
        "operator's command line; `anonymous`: a failed sign-in.",
    )
    id = serializers.CharField(help_text="The key's or user's id, kept after it is deleted.")
    name = serializers.CharField(help_text="Its name at the time, kept after it is deleted.")


class AuditTargetOut(serializers.Serializer):
    type = serializers.CharField(
        help_text="key, invitation, member, workspace, domain, label, webhook, inbox, "
        "outbox_item or user."
    )
    id = serializers.CharField()
    name = serializers.CharField(help_text="A display name at the time of the change.")


class AuditEntryOut(serializers.Serializer):
    id = serializers.CharField()
    created_at = serializers.DateTimeField()
    actor = AuditActorOut()
    action = serializers.CharField(help_text="A dotted action of the documented vocabulary.")
    target = AuditTargetOut()
    changes = serializers.DictField(
        child=serializers.DictField(),
        help_text="Per changed field, `before` and/or `after`. Only fields on the allow-list of "
        "the target's type appear: never a secret, a password or a key.",
    )
    ip = serializers.IPAddressField(allow_null=True, help_text="The client's address.")


def audit_record(entry: AuditEntry) -> dict:
    """An :class:`~apikeys.models.AuditEntry` as :class:`AuditEntryOut` reads it."""
    return {
        "id": entry.pk,
        "created_at": entry.created_at,
        "actor": {
            "type": entry.actor_type,
            "id": entry.actor_id,
            "name": entry.actor_name,
        },
        "action": entry.action,
        "target": {
            "type": entry.target_type,
            "id": entry.target_id,
            "name": entry.target_name,
        },
        "changes": entry.changes,
        "ip": entry.ip,
    }

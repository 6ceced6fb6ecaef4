"""Request and response shapes of /inboxes and /domains."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from config.api.inputs import JsonIn, single_line
from config.api.query import PageQuery
from inboxes.addresses import DOMAIN_RE, is_valid_local_part
from inboxes.models import CheckResult, Overflow
from inboxes.selectors import DomainInfo
from inboxes.services import MAX_TTL_MINUTES


class DomainVerificationOut(serializers.Serializer):
    """The DNS record that proves control of a custom domain, and the last check of it."""

    name = serializers.CharField(help_text="The record's name: `_pigeonhole.<domain>`.")
    type = serializers.ChoiceField(choices=["TXT"])
    value = serializers.CharField(
        help_text="The record's value: `pigeonhole-verification=<token>` (a token per domain)."
    )
    verified_at = serializers.DateTimeField(
        allow_null=True,
        help_text="When a check last found the record. Null on a verified domain means an "
        "operator vouched for it (an upgrade keeps existing domains verified that way); the "
        "record is then never required, but a check that finds it makes the domain an ordinary "
        "verified one.",
    )
    checked_at = serializers.DateTimeField(
        allow_null=True, help_text="When the record was last looked up (null: never)."
    )
    result = serializers.ChoiceField(
        choices=CheckResult.choices,
        allow_null=True,
        help_text="The last check's outcome: `found`; `missing` (the name has no such record: a "
        "verified domain stops receiving after DOMAIN_UNVERIFY_AFTER such checks in a row, "
        "default 3); `dns_error` (no answer; changes nothing); `conflict` (another workspace "
        "verified the name first); `refused` (a shared domain or a subdomain of one, claimed "
        "before that was refused: never a custom domain). Null before the first check.",
    )
    detail = serializers.CharField(help_text="The last check's outcome in words.")


class DomainOut(serializers.Serializer):
    domain = serializers.CharField()
    shared = serializers.BooleanField(help_text="Offered to every workspace by this instance.")
    catch_all = serializers.BooleanField(
        help_text="Mail to an unknown local part creates the inbox (custom domains only)."
    )
    default = serializers.BooleanField(help_text="Used when POST /inboxes names no domain.")
    verified = serializers.BooleanField(
        help_text="Receives mail and takes new inboxes. Always true for a shared domain; a "
        "custom domain is verified by publishing the `verification` record."
    )
    verification = serializers.SerializerMethodField(
        help_text="Custom domains: the record to publish and the last check. Null for a shared "
        "domain."
    )

    @extend_schema_field(DomainVerificationOut(allow_null=True))
    def get_verification(self, info: DomainInfo) -> dict[str, Any] | None:
        row = info.row
        if row is None:
            return None
        return DomainVerificationOut(
            {
                "name": row.record_name,
                "type": "TXT",
                "value": row.record_value,
                "verified_at": row.verified_at,
                "checked_at": row.last_checked_at,
                "result": row.last_check_result or None,
                "detail": row.last_check_detail,
            }
        ).data


FORWARD_TO_HELP = (
    "Every email the inbox receives is copied to this address as an outbox item of kind forward "
    "(null: no forwarding). An address outside the workspace's domains (its shared and custom "
    "domains) needs the `send` scope to set or change; the key or member that set it is "
    "remembered. Each copy waits for approval (`pending`, decided like any send) when, at the "
    "moment it is made: the workspace requires approval; or the setter's key required approval "
    "when it set forwarding, or requires it now; or that key has since been revoked, expired "
    "or deleted, or the member who set it has left the workspace; or forwarding was set before "
    "the setter was recorded. Giving `forward_to` again (even unchanged) as a key or member "
    "allowed to set it makes that one the setter. The copy goes out from the inbox's own "
    "address, never with the "
    'original From: `From: "<original name and address> via Pigeonhole" <inbox address>`, '
    "`Reply-To:` the original sender, the rest of the message as received, and a "
    "`X-Pigeonhole-Forwarded-By` header so that a message is never forwarded twice."
)


def _validate_sender_rule(value: str) -> str:
    rule = value.strip().lower()
    local, at, domain = rule.lstrip("@").rpartition("@")
    if not DOMAIN_RE.match(domain) or (at and not local):
        raise serializers.ValidationError(
            "Use an address (bob@example.com) or a domain (example.com)."
        )
    return rule


class SenderRuleField(serializers.CharField):
    def __init__(self, **kwargs: object) -> None:
        super().__init__(max_length=320, validators=[_validate_sender_rule], **kwargs)


class _InboxFieldsIn(JsonIn):
    name = serializers.CharField(
        max_length=200,
        allow_blank=True,
        required=False,
        validators=[single_line],
        help_text="Display name; the From name of mail sent from the inbox.",
    )
    ttl_minutes = serializers.IntegerField(
        min_value=1,
        max_value=MAX_TTL_MINUTES,
        allow_null=True,
        required=False,
        help_text="Minutes until expiry; null = permanent (needs the entitlement). Omitted on "
        "create: permanent when allowed, else 60.",
    )
    agent_name = serializers.CharField(max_length=200, allow_blank=True, required=False)
    tags = serializers.ListField(
        child=serializers.CharField(max_length=64), max_length=50, required=False
    )
    max_emails = serializers.IntegerField(
        min_value=1, max_value=1_000_000, allow_null=True, required=False
    )
    overflow = serializers.ChoiceField(choices=Overflow.choices, required=False)
    allow_senders = serializers.ListField(child=SenderRuleField(), max_length=500, required=False)
    block_senders = serializers.ListField(child=SenderRuleField(), max_length=500, required=False)
    forward_to = serializers.EmailField(
        max_length=320, allow_null=True, required=False, help_text=FORWARD_TO_HELP
    )


class InboxCreateIn(_InboxFieldsIn):
    local_part = serializers.CharField(
        max_length=64,
        required=False,
        help_text="Dot-atom, 1-64 characters, stored lower-case; `+` is reserved for plus "
        "addressing. Omitted: a readable name like brave-otter-42.",
    )
    domain = serializers.CharField(
        max_length=253, required=False, help_text="Default: see /domains."
    )

    def validate_local_part(self, value: str) -> str:
        value = value.strip().lower()
        if not is_valid_local_part(value):
            raise serializers.ValidationError("Not a valid local part (dot-atom, no '+').")
        return value


class InboxUpdateIn(_InboxFieldsIn):
    extend_minutes = serializers.IntegerField(
        min_value=1,
        max_value=MAX_TTL_MINUTES,
        required=False,
        help_text="Moves expiry to now + N minutes; reactivates an expired inbox.",
    )


class InboxListQuery(PageQuery):
    default_limit = 50
    max_limit = 200

    q = serializers.CharField(
        required=False, max_length=200, help_text="Address, name or agent contains."
    )
    tag = serializers.CharField(required=False, max_length=64)
    agent = serializers.CharField(required=False, max_length=200)
    include_expired = serializers.BooleanField(required=False, default=False)


class InboxOut(serializers.Serializer):
    id = serializers.CharField()
    address = serializers.CharField()
    local_part = serializers.CharField()
    domain = serializers.CharField()
    name = serializers.CharField()
    agent_name = serializers.CharField()
    tags = serializers.ListField(child=serializers.CharField())
    status = serializers.ChoiceField(choices=["active", "expired"])
    permanent = serializers.BooleanField()
    ttl_minutes = serializers.IntegerField(allow_null=True)
    expires_at = serializers.DateTimeField(allow_null=True)
    max_emails = serializers.IntegerField(allow_null=True)
    overflow = serializers.ChoiceField(choices=Overflow.choices)
    allow_senders = serializers.ListField(child=serializers.CharField())
    block_senders = serializers.ListField(child=serializers.CharField())
    forward_to = serializers.CharField(allow_null=True, help_text=FORWARD_TO_HELP)
    email_count = serializers.IntegerField()
    unread_count = serializers.IntegerField()
    last_email_at = serializers.DateTimeField(allow_null=True)
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()

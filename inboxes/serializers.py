"""Request and response shapes of /inboxes and /domains."""

from __future__ import annotations

import re
from typing import Any

import orjson
from django.utils import timezone
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from config.api.inputs import JsonIn, single_line
from config.api.query import PageQuery
from config.api.represent import boolean, dt, integer, text, texts
from inboxes.addresses import DOMAIN_RE, is_valid_local_part
from inboxes.models import CheckResult, Overflow
from inboxes.selectors import DomainInfo, smtp_settings
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


SMTP_FAULTS_HELP = (
    "Faults the SMTP receiver injects for this inbox, to test a sender's retry logic (at most "
    "{max} rules; `[]` turns them off). At each stage the rules are tried in order and the "
    "first that fires answers in place of the normal reply: `always`; `probability` (fires with "
    "that chance); `first` (the first `count` attempts at that stage fault, later ones pass); "
    "`greylist` (the first attempt of each sender and recipient pair within `window_seconds` "
    "is deferred, a retry within the window passes). `stage` `rcpt` answers the RCPT TO of "
    "this inbox's address; `data` answers the message's DATA (when every recipient faulted; "
    "other recipients still get the message). `delay_ms` holds the reply back (other sessions "
    "go on). Every injected fault adds one to `injected_faults` and emits `mail.rejected` with "
    "`injected: true`. Counting (`first`, `greylist`) is shared by every smtpd process."
)
MAX_SMTP_FAULTS = 10
MAX_FAULT_DELAY_MS = 30_000
MAX_FAULT_COUNT = 10_000
MAX_FAULT_WINDOW = 86_400
# 4xx or 5xx, then an enhanced status code of the same class (RFC 3463), then the text.
_FAULT_REPLY_RE = re.compile(r"([45][0-9][0-9]) ([45])\.([0-9]{1,3})\.([0-9]{1,3}) ([ -~]{1,200})")


def _validate_fault_reply(value: str) -> str:
    match = _FAULT_REPLY_RE.fullmatch(value)
    if match is None:
        raise serializers.ValidationError(
            "Use a 4xx or 5xx code, an enhanced status code and a text, as in "
            "'451 4.7.1 Try again later' (printable ASCII, one line)."
        )
    if match.group(1)[0] != match.group(2):
        raise serializers.ValidationError(
            f"The enhanced status code must be of the reply's class ({match.group(1)[0]}.x.x)."
        )
    return value


class SmtpFaultIn(JsonIn):
    """One rule of ``smtp_faults``."""

    stage = serializers.ChoiceField(choices=["rcpt", "data"], help_text="Which reply it replaces.")
    reply = serializers.CharField(
        max_length=220,
        trim_whitespace=False,
        validators=[_validate_fault_reply],
        help_text="The SMTP reply: a 4xx or 5xx code, an enhanced status code of the same "
        "class and a text (printable ASCII), e.g. `451 4.7.1 Try again later`.",
    )
    mode = serializers.ChoiceField(
        choices=["always", "probability", "first", "greylist"], required=False, default="always"
    )
    probability = serializers.FloatField(
        min_value=0, max_value=1, required=False, help_text="`probability` mode: the chance."
    )
    count = serializers.IntegerField(
        min_value=1,
        max_value=MAX_FAULT_COUNT,
        required=False,
        help_text="`first` mode: how many attempts fault (default 1).",
    )
    window_seconds = serializers.IntegerField(
        min_value=1,
        max_value=MAX_FAULT_WINDOW,
        required=False,
        help_text="`greylist` mode: how long a deferred pair is remembered (default 300).",
    )
    delay_ms = serializers.IntegerField(
        min_value=0,
        max_value=MAX_FAULT_DELAY_MS,
        required=False,
        default=0,
        help_text="Milliseconds to wait before the reply.",
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        mode = attrs["mode"]
        wanted = {"probability": "probability", "first": "count", "greylist": "window_seconds"}
        for name in ("probability", "count", "window_seconds"):
            if name in attrs and wanted.get(mode) != name:
                raise serializers.ValidationError({name: f"Not used by mode '{mode}'."})
        if mode == "probability" and "probability" not in attrs:
            raise serializers.ValidationError({"probability": "Required by mode 'probability'."})
        rule = {"stage": attrs["stage"], "reply": attrs["reply"], "mode": mode}
        if mode == "probability":
            rule["probability"] = attrs["probability"]
        elif mode == "first":
            rule["count"] = attrs.get("count", 1)
        elif mode == "greylist":
            rule["window_seconds"] = attrs.get("window_seconds", 300)
        rule["delay_ms"] = attrs.get("delay_ms", 0)
        return rule


class SmtpFaultOut(serializers.Serializer):
    stage = serializers.ChoiceField(choices=["rcpt", "data"])
    reply = serializers.CharField()
    mode = serializers.ChoiceField(choices=["always", "probability", "first", "greylist"])
    probability = serializers.FloatField(required=False)
    count = serializers.IntegerField(required=False)
    window_seconds = serializers.IntegerField(required=False)
    delay_ms = serializers.IntegerField()


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
    smtp_faults = serializers.ListField(
        child=SmtpFaultIn(),
        max_length=MAX_SMTP_FAULTS,
        required=False,
        help_text=SMTP_FAULTS_HELP.format(max=MAX_SMTP_FAULTS),
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
    smtp_faults = SmtpFaultOut(many=True, help_text=SMTP_FAULTS_HELP.format(max=MAX_SMTP_FAULTS))
    injected_faults = serializers.IntegerField(
        help_text="Faults the SMTP receiver has injected for this inbox (see `smtp_faults`)."
    )
    email_count = serializers.IntegerField()
    unread_count = serializers.IntegerField()
    last_email_at = serializers.DateTimeField(allow_null=True)
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()

    def to_representation(self, inbox: Any) -> dict[str, Any]:
        """The fields above as DRF writes them (config.api.represent), without its machinery."""
        expires_at = inbox.expires_at
        return {
            "id": text(inbox.id),
            "address": text(inbox.address),
            "local_part": text(inbox.local_part),
            "domain": text(inbox.domain),
            "name": text(inbox.name),
            "agent_name": text(inbox.agent_name),
            "tags": texts(inbox.tags),
            "status": inbox.status,
            "permanent": boolean(inbox.permanent),
            "ttl_minutes": integer(inbox.ttl_minutes),
            "expires_at": dt(expires_at),
            "max_emails": integer(inbox.max_emails),
            "overflow": inbox.overflow,
            "allow_senders": texts(inbox.allow_senders),
            "block_senders": texts(inbox.block_senders),
            "forward_to": text(inbox.forward_to),
            "smtp_faults": None
            if inbox.smtp_faults is None
            else [smtp_fault(f) for f in inbox.smtp_faults],
            "injected_faults": integer(inbox.injected_faults),
            "email_count": integer(inbox.email_count),
            "unread_count": integer(inbox.unread_count),
            "last_email_at": dt(inbox.last_email_at),
            "created_at": dt(inbox.created_at),
            "updated_at": dt(inbox.updated_at),
        }


def inbox_rows_out(rows: list[tuple]) -> list[dict[str, Any]]:
    """``InboxOut`` of rows read as ``selectors.INBOX_COLUMNS`` (JSON columns as text, decoded
    here by orjson): a page of inboxes without a model instance per row. The text and integer
    columns are written as read: ``text``/``integer`` of a ``str``/``int`` (or None) column is
    the value itself; the JSON lists still go through ``texts``, as DRF's ListField would."""
    now = timezone.now()
    out = []
    for (
        pk,
        address,
        local_part,
        domain,
        name,
        agent_name,
        tags,
        ttl_minutes,
        expires_at,
        max_emails,
        overflow,
        allow_senders,
        block_senders,
        forward_to,
        smtp_faults,
        injected_faults,
        email_count,
        unread_count,
        last_email_at,
        created_at,
        updated_at,
    ) in rows:
        faults = _json(smtp_faults)
        out.append(
            {
                "id": pk,
                "address": address,
                "local_part": local_part,
                "domain": domain,
                "name": name,
                "agent_name": agent_name,
                "tags": texts(_json(tags)),
                "status": "expired" if expires_at is not None and expires_at <= now else "active",
                "permanent": expires_at is None,
                "ttl_minutes": ttl_minutes,
                "expires_at": dt(expires_at),
                "max_emails": max_emails,
                "overflow": overflow,
                "allow_senders": texts(_json(allow_senders)),
                "block_senders": texts(_json(block_senders)),
                "forward_to": forward_to,
                "smtp_faults": None if faults is None else [smtp_fault(f) for f in faults],
                "injected_faults": injected_faults,
                "email_count": email_count,
                "unread_count": unread_count,
                "last_email_at": dt(last_email_at),
                "created_at": dt(created_at),
                "updated_at": dt(updated_at),
            }
        )
    return out


def _json(value: str | None) -> Any:
    return None if value is None else orjson.loads(value)


def smtp_fault(fault: dict[str, Any]) -> dict[str, Any]:
    """``SmtpFaultOut`` of one stored fault: the optional fields only when present."""
    out: dict[str, Any] = {
        "stage": fault["stage"],
        "reply": text(fault["reply"]),
        "mode": fault["mode"],
    }
    if "probability" in fault:
        out["probability"] = None if fault["probability"] is None else float(fault["probability"])
    for name in ("count", "window_seconds"):
        if name in fault:
            out[name] = integer(fault[name])
    out["delay_ms"] = integer(fault["delay_ms"])
    return out


class SmtpCredentialCreateIn(JsonIn):
    name = serializers.CharField(
        required=False,
        default="",
        allow_blank=True,
        max_length=200,
        validators=[single_line],
        help_text="A note of yours: which application or test uses it.",
    )


class SmtpCredentialListQuery(PageQuery):
    default_limit = 50
    max_limit = 200


class SmtpSettingsOut(serializers.Serializer):
    """How an application reaches the SMTP receiver with the credential."""

    host = serializers.CharField(help_text="The SMTP server's host name (`SMTP_HOSTNAME`).")
    port = serializers.IntegerField(help_text="The SMTP port (`SMTP_PORT`); STARTTLS there.")
    starttls = serializers.BooleanField(
        help_text="Whether the SMTP port offers STARTTLS (a certificate is configured, or "
        "embedded mode's self-signed one)."
    )
    smtps_port = serializers.IntegerField(
        allow_null=True, help_text="The implicit-TLS port (`SMTPS_PORT`), null when there is none."
    )
    plaintext_auth = serializers.BooleanField(
        help_text="Whether AUTH is accepted without TLS (`SMTP_AUTH_ALLOW_PLAINTEXT`; embedded "
        "mode). Otherwise authenticate after STARTTLS or on the implicit-TLS port."
    )
    mechanisms = serializers.ListField(
        child=serializers.ChoiceField(choices=["PLAIN", "LOGIN"]),
        help_text="The AUTH mechanisms offered.",
    )


class SmtpCredentialOut(serializers.Serializer):
    id = serializers.CharField()
    inbox_id = serializers.CharField()
    name = serializers.CharField()
    username = serializers.CharField(
        help_text="The SMTP AUTH username: generated from the inbox's local part, unique."
    )
    created_at = serializers.DateTimeField()
    last_used_at = serializers.DateTimeField(
        allow_null=True, help_text="The last successful AUTH (to the minute)."
    )
    smtp = serializers.SerializerMethodField()

    @extend_schema_field(SmtpSettingsOut)
    def get_smtp(self, credential: Any) -> dict[str, Any]:
        return SmtpSettingsOut(self.context.get("smtp") or smtp_settings()).data


class SmtpCredentialCreatedOut(SmtpCredentialOut):
    password = serializers.CharField(
        help_text="The SMTP AUTH password (`pgs_…`), in this response only: it is stored as a "
        "digest and cannot be shown again."
    )

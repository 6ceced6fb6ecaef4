"""Request and response shapes of the emails API."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from config.api.inputs import JsonIn
from config.api.query import PageQuery
from config.api.represent import boolean, dt, integer, text, texts

Q_HELP = (
    "A search, every term ANDed (docs/api.md, Searching mail). A bare `word` or "
    '`"quoted phrase"` matches the sender (address or name) or the subject as a '
    "case-insensitive substring, or the whole text body by its words (a phrase: its words in "
    "that order). Operators: `from:` (sender address or name), `to:` (an envelope recipient, "
    "plus tag included, or a To address), `subject:` (substrings, case-insensitive), "
    "`label:key`, `inbox:` (id or address), `header:Name=value` (whole value, "
    "case-insensitive; `header:Name` alone: present), `has:attachment`, `has:code`, "
    "`has:link`, `is:read`, `is:unread`, `is:starred`, `spf:`, `dkim:`, `dmarc:`, `arc:` (a "
    "result of that verification, e.g. `dmarc:fail`; `dkim:` any signature's, `dkim:none` "
    "unsigned), `before:` and `after:` (a date, "
    "`2026-11-27` = its midnight UTC, or an ISO 8601 date-time; `before:` strictly earlier, "
    '`after:` at or after). An operator\'s value may be quoted (`subject:"your code"`). `-` '
    "before any term negates it (`-from:bank`). A word whose part before its colon is no "
    "operator (`10:30`, `re:`) is a plain word; no regular expressions or wildcards (`*`, `%` "
    "are searched as they are). At most 20 terms. A malformed query (an unterminated quote, "
    "an unknown `has:`/`is:` value, a date that is not one, an empty value, a lone `-`, a "
    "`label:` or `inbox:` the workspace does not have) is 400 validation_error with one issue "
    "at path `q` naming the term and its 0-based character position. A search whose database "
    "work takes longer than `SEARCH_TIMEOUT_MS` (3 s by default) is stopped: 400 "
    "validation_error at path `q` saying so (terms the indexes serve: words, `from:`, "
    "`subject:`, `inbox:`, `before:`/`after:`; `header:`, `to:` and negated terms read every "
    "email in scope)."
)


class EmailListQuery(PageQuery):
    default_limit = 25
    max_limit = 100

    q = serializers.CharField(required=False, max_length=200, help_text=Q_HELP)
    label = serializers.CharField(
        required=False,
        max_length=63,
        help_text="Only mail carrying this label (a key; one the workspace has not defined is "
        "400 unknown_label).",
    )
    unread = serializers.BooleanField(
        required=False, help_text="true: only unread mail; false: only read mail; omitted: both."
    )
    since = serializers.DateTimeField(required=False, help_text="Only mail received after it.")


class AllEmailsQuery(EmailListQuery):
    inbox = serializers.CharField(
        required=False, max_length=320, help_text="Inbox id or address; omitted: all inboxes."
    )


class EmailReadQuery(serializers.Serializer):
    mark_read = serializers.BooleanField(required=False, default=False)


class EmailUpdateIn(JsonIn):
    read = serializers.BooleanField(required=False)
    starred = serializers.BooleanField(required=False)
    labels = serializers.ListField(
        child=serializers.CharField(max_length=63),
        max_length=100,
        required=False,
        help_text="Replaces the manual labels with these keys (rule and classifier labels stay).",
    )
    remove_labels = serializers.ListField(
        child=serializers.CharField(max_length=63),
        max_length=100,
        required=False,
        help_text="Removes these labels whatever their source; a removed classifier label "
        "teaches the built-in classifier (and is not applied to this email again).",
    )


class AddressOut(serializers.Serializer):
    address = serializers.CharField()
    name = serializers.CharField()


class LabelRefOut(serializers.Serializer):
    key = serializers.CharField()
    source = serializers.ChoiceField(choices=["rule", "classifier", "manual"])
    confidence = serializers.FloatField()


class LinkOut(serializers.Serializer):
    url = serializers.CharField()
    text = serializers.CharField()
    kind = serializers.ChoiceField(choices=["verify", "login", "reset", "unsubscribe", "other"])


class ExtractedOut(serializers.Serializer):
    code = serializers.CharField(allow_null=True, help_text="The primary verification code.")
    link = serializers.CharField(allow_null=True, help_text="The primary link.")
    codes = serializers.ListField(child=serializers.CharField())
    links = LinkOut(many=True)


class HeaderOut(serializers.Serializer):
    name = serializers.CharField()
    value = serializers.CharField()


class AttachmentOut(serializers.Serializer):
    id = serializers.CharField()
    filename = serializers.CharField()
    content_type = serializers.CharField()
    size = serializers.IntegerField()
    content_id = serializers.CharField()
    inline = serializers.BooleanField()


_REASON = "Why, in words (the library's explanation; empty when it passed)."


class AuthSpfOut(serializers.Serializer):
    result = serializers.ChoiceField(
        choices=["pass", "fail", "softfail", "neutral", "none", "temperror", "permerror"]
    )
    domain = serializers.CharField(
        help_text="The domain checked: the envelope sender's, or the HELO name's when the "
        "envelope sender is empty (a bounce)."
    )
    identity = serializers.ChoiceField(
        choices=["mailfrom", "helo"], help_text="Which identity was checked."
    )
    client_ip = serializers.CharField(help_text="The SMTP client's address.")
    reason = serializers.CharField(help_text=_REASON)


class AuthDkimOut(serializers.Serializer):
    result = serializers.ChoiceField(choices=["pass", "fail", "neutral", "temperror", "permerror"])
    domain = serializers.CharField(help_text="The signing domain (d=).")
    selector = serializers.CharField(help_text="The selector (s=).")
    reason = serializers.CharField(
        help_text=f"{_REASON} `permerror`: no key or a malformed signature; `fail`: the body "
        "or the signed headers were altered, or the key does not match; `neutral`: not "
        "verified, the message is over `MAIL_AUTH_MAX_BYTES`."
    )


class AuthDmarcOut(serializers.Serializer):
    result = serializers.ChoiceField(choices=["pass", "fail", "none", "temperror", "permerror"])
    domain = serializers.CharField(help_text="The From header's domain (empty: none).")
    policy = serializers.ChoiceField(
        choices=["none", "quarantine", "reject"],
        allow_null=True,
        help_text="The domain owner's policy for this domain (p=, or sp= from the "
        "organisational domain's record); reported, never enforced: the message is stored.",
    )
    alignment = serializers.ListField(
        child=serializers.ChoiceField(choices=["dkim", "spf"]),
        help_text="The mechanisms that passed aligned with the From domain (either makes DMARC "
        "pass).",
    )
    reason = serializers.CharField(help_text=_REASON)


class AuthArcOut(serializers.Serializer):
    result = serializers.ChoiceField(choices=["pass", "fail", "none", "neutral", "temperror"])
    domain = serializers.CharField(help_text="The newest ARC-Seal's domain (d=), if any.")
    instances = serializers.IntegerField(help_text="ARC sets in the chain.")
    reason = serializers.CharField(help_text=_REASON)


def _ordered(entry: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    return {key: entry.get(key) for key in keys}


def authentication_out(verdict: dict[str, Any] | None) -> dict[str, Any] | None:
    """``authentication`` as :class:`AuthenticationOut` renders it, fields in its order (the
    stored JSON's keys come back in PostgreSQL's jsonb order)."""
    if verdict is None:
        return None
    return {
        "spf": _ordered(verdict["spf"], ("result", "domain", "identity", "client_ip", "reason")),
        "dkim": [_ordered(s, ("result", "domain", "selector", "reason")) for s in verdict["dkim"]],
        "dmarc": _ordered(verdict["dmarc"], ("result", "domain", "policy", "alignment", "reason")),
        "arc": _ordered(verdict["arc"], ("result", "domain", "instances", "reason")),
    }


class AuthenticationOut(serializers.Serializer):
    spf = AuthSpfOut()
    dkim = AuthDkimOut(
        many=True, help_text="One per DKIM-Signature, topmost first; empty: unsigned."
    )
    dmarc = AuthDmarcOut()
    arc = AuthArcOut()


AUTHENTICATION_HELP = (
    "SPF, DKIM, DMARC and ARC verdicts, checked when the message arrived over SMTP (DNS within "
    "`MAIL_AUTH_BUDGET`; a lookup that could not be answered in time gives `temperror`). "
    "Reported only: no verdict refuses mail. `null`: not checked (`MAIL_AUTH_CHECKS` off, or "
    "the message did not arrive over SMTP). Not in list summaries; in `email.received`."
)


class _EmailBase(serializers.Serializer):
    id = serializers.CharField()
    inbox_id = serializers.CharField()
    to = AddressOut(many=True)
    subject = serializers.CharField()
    preview = serializers.CharField()
    labels = serializers.SerializerMethodField()
    read = serializers.BooleanField()
    starred = serializers.BooleanField()
    received_at = serializers.DateTimeField()

    def get_fields(self) -> dict[str, serializers.Field]:
        fields = super().get_fields()
        fields["from"] = serializers.SerializerMethodField(method_name="get_from")
        return fields

    @extend_schema_field(AddressOut(allow_null=True))
    def get_from(self, email: Any) -> dict[str, str] | None:
        return sender_of(email)

    @extend_schema_field(LabelRefOut(many=True))
    def get_labels(self, email: Any) -> list[dict]:
        return [
            {"key": row.key, "source": row.source, "confidence": row.confidence}
            for row in email.email_labels.all()
        ]

    def base(self, email: Any) -> dict[str, Any]:
        """The fields of this class as DRF writes them (config.api.represent), ``from`` left
        for the end (``get_fields`` puts it last)."""
        return {
            "id": text(email.id),
            "inbox_id": text(email.inbox_id),
            "to": addresses(email.to),
            "subject": text(email.subject),
            "preview": text(email.preview),
            "labels": self.get_labels(email),
            "read": boolean(email.read),
            "starred": boolean(email.starred),
            "received_at": dt(email.received_at),
        }


def addresses(rows: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
    """``AddressOut(many=True)`` of stored addresses."""
    if rows is None:
        return None
    return [{"address": text(a["address"]), "name": text(a["name"])} for a in rows]


class EmailSummaryOut(_EmailBase):
    has_attachments = serializers.BooleanField()

    def to_representation(self, email: Any) -> dict[str, Any]:
        out = self.base(email)
        out["has_attachments"] = boolean(email.has_attachments)
        out["from"] = self.get_from(email)
        return out


class EmailOut(_EmailBase):
    message_id = serializers.CharField()
    cc = AddressOut(many=True)
    reply_to = AddressOut(many=True)
    text = serializers.CharField()
    html = serializers.CharField()
    headers = serializers.SerializerMethodField()
    attachments = AttachmentOut(many=True)
    extracted = ExtractedOut()
    size = serializers.IntegerField()
    in_reply_to = serializers.CharField()
    references = serializers.ListField(child=serializers.CharField())
    defects = serializers.ListField(
        child=serializers.CharField(), help_text="What could not be parsed, if anything."
    )
    authentication = AuthenticationOut(allow_null=True, help_text=AUTHENTICATION_HELP)
    envelope_recipients = serializers.SerializerMethodField(
        help_text="The SMTP envelope recipients (RCPT TO) this email was stored for, as "
        "received: the recipients of the message whose address is this inbox's (plus tags "
        "included), or, for mail sent with one of the inbox's sandbox SMTP credentials, every "
        "recipient of the message, whatever its domain (in the order given, at most 100)."
    )

    @extend_schema_field(serializers.ListField(child=serializers.CharField()))
    def get_envelope_recipients(self, email: Any) -> list[str]:
        return envelope_recipients_of(email)

    @extend_schema_field(HeaderOut(many=True))
    def get_headers(self, email: Any) -> list[dict[str, str]]:
        return [{"name": name, "value": value} for name, value in email.headers]

    def to_representation(self, email: Any) -> dict[str, Any]:
        return email_out(
            email,
            self.get_labels(email),
            [
                (a.id, a.filename, a.content_type, a.size, a.content_id, a.inline)
                for a in email.attachments.all()
            ],
        )


def email_record_out(record: Any) -> dict[str, Any]:
    """``EmailOut`` of a ``mail.selectors.EmailRecord`` (getEmail's one-statement read)."""
    labels = [
        {"key": key, "source": source, "confidence": confidence}
        for key, source, confidence in record.labels
    ]
    return email_out(record.email, labels, record.attachments)


def email_out(email: Any, labels: list[dict], attachments: list[tuple]) -> dict[str, Any]:
    """``EmailOut``'s fields as DRF writes them (config.api.represent), of an email, its labels
    (as ``get_labels`` writes them) and its attachments (id, filename, content_type, size,
    content_id, inline)."""
    extracted = email.extracted
    return {
        "id": text(email.id),
        "inbox_id": text(email.inbox_id),
        "to": addresses(email.to),
        "subject": text(email.subject),
        "preview": text(email.preview),
        "labels": labels,
        "read": boolean(email.read),
        "starred": boolean(email.starred),
        "received_at": dt(email.received_at),
        "message_id": text(email.message_id),
        "cc": addresses(email.cc),
        "reply_to": addresses(email.reply_to),
        "text": text(email.text),
        "html": text(email.html),
        "headers": [{"name": name, "value": value} for name, value in email.headers],
        "attachments": [
            {
                "id": text(pk),
                "filename": text(filename),
                "content_type": text(content_type),
                "size": integer(size),
                "content_id": text(content_id),
                "inline": boolean(inline),
            }
            for pk, filename, content_type, size, content_id, inline in attachments
        ],
        "extracted": None
        if extracted is None
        else {
            "code": text(extracted["code"]),
            "link": text(extracted["link"]),
            "codes": texts(extracted["codes"]),
            "links": [
                {"url": text(x["url"]), "text": text(x["text"]), "kind": x["kind"]}
                for x in extracted["links"]
            ],
        },
        "size": integer(email.size),
        "in_reply_to": text(email.in_reply_to),
        "references": texts(email.references),
        "defects": texts(email.defects),
        "authentication": authentication_out(email.authentication),
        "envelope_recipients": envelope_recipients_of(email),
        "from": sender_of(email),
    }


def sender_of(email: Any) -> dict[str, str] | None:
    """``from``: the sender's address and name, or None when neither is known."""
    if not email.from_address and not email.from_name:
        return None
    return {"address": email.from_address, "name": email.from_name}


def envelope_recipients_of(email: Any) -> list[str]:
    """``envelope_recipients``: as stored, or ``[envelope_to]`` for rows stored before it."""
    if email.envelope_recipients:
        return list(email.envelope_recipients)
    return [email.envelope_to] if email.envelope_to else []

"""Request and response shapes of /labels and /labels/test."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from config.api.inputs import JsonIn
from config.api.query import PageQuery
from labels import rules as rules_engine
from labels.models import Color

KEY_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,62}$"


def _nest(issues: list[dict[str, str]], prefix: str) -> dict:
    """``rules.conditions.0.op`` issues as DRF's nested error detail under ``rules``."""
    tree: dict[str, Any] = {}
    for issue in issues:
        parts = issue["path"].split(".")[1:] if issue["path"].startswith(prefix) else []
        node = tree
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        if parts:
            node.setdefault(parts[-1], []).append(issue["message"])
        else:
            tree.setdefault("non_field_errors", []).append(issue["message"])
    return tree


class RulesField(serializers.JSONField):
    """The rules object, validated by the rules engine with precise paths."""

    def to_internal_value(self, data: Any) -> dict:
        value = super().to_internal_value(data)
        normalised, issues = rules_engine.validate(value, path="rules")
        if issues:
            raise serializers.ValidationError(_nest(issues, "rules"))
        return normalised


class _LabelFieldsIn(JsonIn):
    name = serializers.CharField(max_length=200)
    color = serializers.ChoiceField(choices=Color.choices, default=Color.VIOLET)
    instructions = serializers.CharField(
        max_length=2000,
        allow_blank=True,
        default="",
        trim_whitespace=True,
        help_text="A yes/no question the classifier answers for each email; empty = rules only.",
    )
    threshold = serializers.FloatField(min_value=0.0, max_value=0.99, default=0.7)
    rules = RulesField(
        default=dict,
        help_text='{"match": "any"|"all", "conditions": [{"field", "op", "value", "name", '
        '"negate"}]}; fields from, to, subject, text, html, body, header, attachment_name, '
        "has_attachments, and the authentication verdicts auth.spf, auth.dkim, auth.dmarc, "
        "auth.arc (their results: pass, fail, softfail, neutral, none, temperror, permerror; "
        "auth.dkim: each signature's, none when unsigned); ops contains, equals, starts_with, "
        "ends_with, regex, domain, exists.",
    )
    enabled = serializers.BooleanField(default=True)


class LabelCreateIn(_LabelFieldsIn):
    key = serializers.RegexField(
        KEY_PATTERN, max_length=63, help_text="`^[a-z0-9][a-z0-9_-]{0,62}$`; `test` is reserved."
    )

    def validate_key(self, value: str) -> str:
        if value == "test":
            raise serializers.ValidationError("'test' is reserved (POST /labels/test).")
        return value


class LabelUpdateIn(_LabelFieldsIn):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for field in self.fields.values():
            field.required = False
            field.default = serializers.empty


class LabelListQuery(PageQuery):
    default_limit = 50
    max_limit = 200


class LabelOut(serializers.Serializer):
    id = serializers.CharField()
    key = serializers.CharField()
    name = serializers.CharField()
    color = serializers.ChoiceField(choices=Color.choices)
    instructions = serializers.CharField()
    threshold = serializers.FloatField()
    rules = serializers.JSONField()
    enabled = serializers.BooleanField()
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()


class LabelDeletedOut(serializers.Serializer):
    deleted = serializers.BooleanField()
    id = serializers.CharField()
    key = serializers.CharField()


class LabelDraftIn(JsonIn):
    """An unsaved label to test as typed (the dashboard's rule editor)."""

    key = serializers.CharField(max_length=63, required=False, default="draft")
    rules = RulesField(default=dict)
    instructions = serializers.CharField(
        max_length=2000, allow_blank=True, default="", trim_whitespace=True
    )
    threshold = serializers.FloatField(min_value=0.0, max_value=0.99, default=0.7)


class LabelTestIn(JsonIn):
    label = LabelDraftIn(
        required=False,
        help_text="Extension: an unsaved label (key, rules, instructions, threshold) tested in "
        "place of the saved label with that key; nothing is stored.",
    )
    email_id = serializers.CharField(
        required=False, max_length=32, help_text="Test a stored email instead of the fields."
    )
    subject = serializers.CharField(required=False, allow_blank=True, default="", max_length=2000)
    text = serializers.CharField(required=False, allow_blank=True, default="", max_length=200_000)

    def get_fields(self) -> dict[str, serializers.Field]:
        fields = super().get_fields()
        fields["from"] = serializers.CharField(
            required=False,
            default="sender@example.com",
            max_length=320,
            help_text="The sender address (default a placeholder).",
        )
        return fields


class LabelTestResultOut(serializers.Serializer):
    key = serializers.CharField()
    matched = serializers.BooleanField()
    source = serializers.ChoiceField(choices=["rule", "classifier"], allow_null=True)
    confidence = serializers.FloatField()
    reason = serializers.CharField()


class LabelTestOut(serializers.Serializer):
    results = LabelTestResultOut(many=True)


class LabelExampleIn(JsonIn):
    email_id = serializers.CharField(
        max_length=32, help_text="A stored email of the workspace (404 not_found otherwise)."
    )
    answer = serializers.ChoiceField(
        choices=["yes", "no"], help_text="Whether the label applies to this email."
    )


class LabelExampleListQuery(PageQuery):
    default_limit = 50
    max_limit = 200


class LabelExampleOut(serializers.Serializer):
    id = serializers.CharField(help_text="Prefix `lex_`.")
    email_id = serializers.CharField()
    answer = serializers.ChoiceField(choices=["yes", "no"])
    source = serializers.ChoiceField(
        choices=["example", "label", "removal"],
        help_text="`example`: given here or with the dashboard's yes / no buttons; `label`: a "
        "person put the label on the email; `removal`: a person took the classifier's label off.",
    )
    from_address = serializers.CharField()
    subject = serializers.CharField()
    created_at = serializers.DateTimeField()


def example_record(row: Any) -> dict[str, Any]:
    """What :class:`LabelExampleOut` shows of a ``LabelFeedback`` row."""
    return {
        "id": row.public_id,
        "email_id": row.email_id,
        "answer": "yes" if row.positive else "no",
        "source": row.source,
        "from_address": row.from_address,
        "subject": row.subject,
        "created_at": row.created_at,
    }


class LabelExampleDeletedOut(serializers.Serializer):
    deleted = serializers.BooleanField()
    id = serializers.CharField()

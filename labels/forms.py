"""Dashboard forms of the labels app: the label editor (fields, the rule as JSON) and the tester.

The editor validates with the API's own serializers (``LabelCreateIn`` / ``LabelUpdateIn``), so
the dashboard accepts exactly what ``POST /labels`` and ``PATCH /labels/{key}`` accept; their
issues (``rules.conditions.0.op`` …) are shown in plain words next to the field.
"""

from __future__ import annotations

import json
import re
from typing import Any

from django import forms

from config.api.errors import flatten_issues
from config.api.parsers import loads
from config.forms import DashboardForm
from labels.models import Color
from labels.serializers import LabelCreateIn, LabelUpdateIn

RULE_EXAMPLE = {
    "match": "any",
    "conditions": [
        {"field": "subject", "op": "contains", "value": "invoice"},
        {"field": "from", "op": "domain", "value": "billing.example.com"},
    ],
}
RULE_EXAMPLE_JSON = json.dumps(RULE_EXAMPLE, indent=2)
_CONDITION = re.compile(r"^rules\.conditions\.(\d+)(?:\.(\w+))?$")


def rule_issue_text(path: str, message: str) -> str:
    """``rules.conditions.0.op`` → "Condition 1, “op”: … (rules.conditions.0.op)"."""
    found = _CONDITION.match(path)
    if found:
        where = f"Condition {int(found.group(1)) + 1}"
        if found.group(2):
            where += f", “{found.group(2)}”"
    elif path in ("rules", ""):
        where = "The rule"
    else:
        where = f"“{path.removeprefix('rules.')}”"
    return f"{where}: {message} ({path})"


class LabelForm(DashboardForm):
    """Create (with ``key``) or edit (without) a label."""

    key = forms.CharField(
        label="Key",
        max_length=63,
        help_text="Lower-case letters, digits, - and _; used in the API and in filters. "
        "It cannot be changed later.",
        widget=forms.TextInput(attrs={"autocomplete": "off", "spellcheck": "false"}),
    )
    name = forms.CharField(label="Name", max_length=200)
    color = forms.ChoiceField(label="Color", choices=Color.choices, initial=Color.VIOLET)
    rules = forms.CharField(
        label="Rule (JSON)",
        required=False,
        strip=True,
        help_text="Leave empty for no rule. Fields: from, to, subject, text, html, body, "
        "header (with name), attachment_name, has_attachments, and the authentication "
        "results auth.spf, auth.dkim, auth.dmarc, auth.arc (pass, fail, none …). Operators: "
        "contains, equals, "
        'starts_with, ends_with, regex, domain, exists; add "negate": true to invert a '
        "condition. Matching ignores case.",
        widget=forms.Textarea(
            attrs={"rows": 10, "spellcheck": "false", "class": "mono", "data-rule-editor": ""}
        ),
    )
    instructions = forms.CharField(
        label="Classifier question",
        required=False,
        max_length=2000,
        help_text="A yes/no question the classifier answers for each email, e.g. “Is this an "
        "invoice or a receipt?”. Leave empty to label by the rule only.",
        widget=forms.Textarea(attrs={"rows": 3}),
    )
    threshold = forms.FloatField(
        label="Classifier threshold",
        min_value=0.0,
        max_value=0.99,
        initial=0.7,
        help_text="The classifier's confidence needed to apply the label (0 to 0.99).",
        widget=forms.NumberInput(attrs={"step": "0.01"}),
    )
    enabled = forms.BooleanField(
        label="Enabled", required=False, initial=True, help_text="Disabled labels are not applied."
    )

    def __init__(self, *args: Any, creating: bool = True, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.creating = creating
        if not creating:
            del self.fields["key"]
        self.validated: dict[str, Any] = {}

    def clean_rules(self) -> dict:
        text = self.cleaned_data.get("rules") or ""
        if not text:
            return {}
        try:
            value = loads(text)  # the API's nesting limit: json.loads recursed into a 500
        except json.JSONDecodeError as exc:
            raise forms.ValidationError(
                f"The rule is not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}."
            ) from None
        except ValueError as exc:  # too deep, or NaN / Infinity
            raise forms.ValidationError(f"The rule is not valid JSON: {exc}.") from None
        if not isinstance(value, dict):
            raise forms.ValidationError(
                "The rule must be a JSON object like the example, with “match” and “conditions”."
            )
        return value

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        if self.errors:
            return cleaned
        data = {name: cleaned[name] for name in self.fields if name in cleaned}
        serializer = (LabelCreateIn if self.creating else LabelUpdateIn)(data=data)
        if serializer.is_valid():
            self.validated = dict(serializer.validated_data)
            return cleaned
        for issue in flatten_issues(serializer.errors):
            self.add_issue(issue["path"], issue["message"])
        return cleaned

    def add_issue(self, path: str, message: str) -> None:
        """One coded-error issue on the field it names (a rule issue in plain words)."""
        field = path.split(".", 1)[0]
        if field == "rules":
            self.add_error("rules", rule_issue_text(path, message))
        elif field in self.fields:
            self.add_error(field, message)
        else:
            self.add_error(None, message)


def rules_text(rules: dict) -> str:
    """The stored rule as the editor shows it ("" for none)."""
    return json.dumps(rules, indent=2) if rules else ""


def rule_summary(rules: dict) -> str:
    """One line for the list: ``subject contains "invoice" or from domain "x.com"``."""
    conditions = rules.get("conditions") or []
    parts = []
    for condition in conditions:
        target = (
            f"header {condition.get('name', '')}"
            if condition.get("field") == "header"
            else str(condition.get("field", ""))
        )
        negation = "not " if condition.get("negate") else ""
        op = str(condition.get("op", "")).replace("_", " ")
        value = "" if condition.get("op") == "exists" else f" “{condition.get('value', '')}”"
        parts.append(f"{target} {negation}{op}{value}")
    joiner = " and " if rules.get("match") == "all" else " or "
    return joiner.join(parts)

"""Dashboard forms of the inboxes app.

The create form validates through the API's own serializer (``InboxCreateIn``), so a field is
accepted or refused in the dashboard exactly as by ``POST /inboxes``.
"""

from __future__ import annotations

import json
import re
from typing import Any

from django import forms

from apikeys.models import Workspace
from config.api.errors import flatten_issues
from config.api.inputs import LINE_BREAKING
from config.forms import DashboardForm
from inboxes.models import Overflow
from inboxes.selectors import domain_list
from inboxes.serializers import InboxCreateIn, InboxUpdateIn
from inboxes.services import MAX_TTL_MINUTES

LIFETIMES = [
    (60, "1 hour"),
    (1440, "1 day"),
    (10080, "7 days"),
    (43200, "30 days"),
]


def _split(value: str) -> list[str]:
    return [part for part in re.split(r"[\s,]+", value or "") if part]


class InboxSearchForm(forms.Form):
    q = forms.CharField(required=False, max_length=200, label="Search")
    status = forms.ChoiceField(
        required=False,
        choices=[("active", "Active"), ("expired", "Expired"), ("all", "All")],
        label="Status",
    )

    def filters(self) -> tuple[str, str]:
        if not self.is_valid():
            return "", "active"
        return self.cleaned_data["q"].strip(), self.cleaned_data["status"] or "active"


class InboxCreateForm(DashboardForm):
    local_part = forms.CharField(
        required=False,
        max_length=64,
        label="Local part",
        help_text="The part before the @. Leave empty for a readable random name "
        "like brave-otter-42.",
    )
    domain = forms.ChoiceField(label="Domain")
    name = forms.CharField(required=False, max_length=200, label="Display name")
    agent_name = forms.CharField(
        required=False, max_length=200, label="Agent", help_text="Who uses this inbox."
    )
    tags = forms.CharField(required=False, label="Tags", help_text="Separated by commas or spaces.")
    lifetime = forms.ChoiceField(label="Lifetime")
    ttl_minutes = forms.IntegerField(
        required=False,
        min_value=1,
        max_value=MAX_TTL_MINUTES,
        label="Custom lifetime in minutes",
        help_text="Used when the lifetime is “Custom”.",
    )
    max_emails = forms.IntegerField(
        required=False,
        min_value=1,
        max_value=1_000_000,
        label="Keep at most this many emails",
        help_text="Empty: no cap.",
    )
    overflow = forms.ChoiceField(
        choices=[
            (Overflow.DROP_OLDEST, "Drop the oldest email"),
            (Overflow.REJECT, "Refuse new mail"),
        ],
        label="When the cap is reached",
    )
    allow_senders = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        label="Only accept mail from",
        help_text="Addresses or domains, separated by commas or new lines. Empty: anyone.",
    )
    block_senders = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        label="Refuse mail from",
        help_text="Addresses or domains.",
    )
    forward_to = forms.EmailField(
        required=False,
        label="Forward a copy to",
        help_text="Each copy is sent mail: it goes out from this inbox's address with the "
        "original sender as Reply-To, and waits for approval when the workspace requires it. "
        "An address outside this workspace's domains needs a role that may send.",
    )

    def __init__(self, *args: Any, workspace: Workspace, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.workspace = workspace
        self.fields["domain"].choices = [
            (d.domain, f"{d.domain}{' (default)' if d.default else ''}")
            for d in domain_list(workspace)
            if d.verified  # an unverified custom domain takes no inboxes (see /domains/)
        ]
        lifetimes: list[tuple[str, str]] = []
        if workspace.allow_permanent_inboxes:
            lifetimes.append(("permanent", "Permanent"))
        lifetimes += [(str(minutes), label) for minutes, label in LIFETIMES]
        lifetimes.append(("custom", "Custom"))
        self.fields["lifetime"].choices = lifetimes
        self.fields["lifetime"].initial = lifetimes[0][0]
        if not workspace.allow_permanent_inboxes:
            self.fields[
                "lifetime"
            ].help_text = "This workspace has disposable inboxes only: every inbox expires."

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if self.errors:
            return data
        payload: dict[str, Any] = {
            "domain": data["domain"],
            "name": data["name"],
            "agent_name": data["agent_name"],
            "tags": _split(data["tags"]),
            "max_emails": data["max_emails"],
            "overflow": data["overflow"],
            "allow_senders": _split(data["allow_senders"]),
            "block_senders": _split(data["block_senders"]),
            "forward_to": data["forward_to"] or None,
        }
        if data["local_part"].strip():
            payload["local_part"] = data["local_part"].strip()
        lifetime = data["lifetime"]
        if lifetime == "permanent":
            payload["ttl_minutes"] = None
        elif lifetime == "custom":
            if data.get("ttl_minutes") is None:
                self.add_error("ttl_minutes", "Give the lifetime in minutes.")
                return data
            payload["ttl_minutes"] = data["ttl_minutes"]
        else:
            payload["ttl_minutes"] = int(lifetime)
        body = InboxCreateIn(data=payload)
        if not body.is_valid():
            for issue in flatten_issues(body.errors):
                name = issue["path"].split(".", 1)[0]
                self.add_error(name if name in self.fields else None, issue["message"])
            return data
        self.service_fields = dict(body.validated_data)
        return data


class InboxLifetimeForm(forms.Form):
    """Extend (or start) the expiry, or make the inbox permanent."""

    minutes = forms.TypedChoiceField(
        coerce=int,
        required=False,
        choices=[(m, label) for m, label in LIFETIMES],
        label="Expire in",
    )
    permanent = forms.BooleanField(required=False)


class DomainAddForm(DashboardForm):
    domain = forms.CharField(
        max_length=253,
        label="Domain",
        help_text="Point its MX record at this instance; it receives mail once a TXT record "
        "proves that you control it.",
    )
    catch_all = forms.BooleanField(
        required=False,
        label="Catch-all",
        help_text="Mail to an unknown address on this domain creates the inbox.",
    )


class DomainCatchAllForm(forms.Form):
    catch_all = forms.BooleanField(required=False)


class InboxFaultsForm(forms.Form):
    """The inbox's ``smtp_faults`` as JSON, checked by the API's own serializer (same rules, same
    paths in the messages)."""

    smtp_faults = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 8, "spellcheck": "false", "class": "mono"}),
        label="Rules (JSON)",
    )

    def clean_smtp_faults(self) -> list[dict[str, Any]]:
        text = self.cleaned_data["smtp_faults"].strip() or "[]"
        try:
            value = json.loads(text)
        except ValueError as error:
            raise forms.ValidationError(f"Not JSON: {error}.") from None
        body = InboxUpdateIn(data={"smtp_faults": value})
        if not body.is_valid():
            raise forms.ValidationError(
                [f"{issue['path']}: {issue['message']}" for issue in flatten_issues(body.errors)]
            )
        return list(body.validated_data["smtp_faults"])


class SmtpCredentialForm(forms.Form):
    """A new sandbox SMTP credential: an optional note (which application uses it)."""

    name = forms.CharField(required=False, max_length=200, label="Note (optional)")

    def clean_name(self) -> str:
        name = self.cleaned_data["name"].strip()
        if any(ch in LINE_BREAKING for ch in name):
            raise forms.ValidationError("Must be one line without control characters.")
        return name

"""Dashboard forms of the approvals pages: approve (with optional edits) and reject.

In the browser, ``static/js/approvals.js`` reads these forms and posts the decision to
``POST /api/v1/outbox/{id}/decision`` with the session; without JavaScript they post to the
dashboard's own decide view, which calls the same ``outbox.services.decide``. The limits are the
API's (``outbox.serializers.DecisionIn``).
"""

from __future__ import annotations

from typing import Any

from django import forms

from config.forms import DashboardForm
from outbox.models import OutboxItem


def _same_text(a: str, b: str) -> bool:
    # Browsers submit text areas with CRLF line ends: an untouched body is not an edit.
    return a.replace("\r\n", "\n") == b.replace("\r\n", "\n")


class ApproveForm(forms.Form):
    """Approve, optionally editing the subject and the text first."""

    prefix = "approve"

    subject = forms.CharField(
        max_length=998,
        required=False,
        strip=False,
        widget=forms.TextInput(attrs={"data-field": "subject"}),
    )
    text = forms.CharField(
        max_length=1_000_000,
        required=False,
        strip=False,
        widget=forms.Textarea(attrs={"data-field": "text", "rows": 10}),
        help_text="Edit before approving if needed; the recipients get what is here (an edited "
        "text also replaces the HTML part, if any, with this text rendered as HTML).",
    )
    note = forms.CharField(
        label="Note (optional)",
        max_length=2000,
        required=False,
        widget=forms.Textarea(attrs={"data-field": "note", "rows": 2}),
        help_text="Kept with the decision and shown to the agent.",
    )

    @classmethod
    def for_item(cls, item: OutboxItem) -> ApproveForm:
        return cls(initial={"subject": item.subject, "text": item.text})

    def edits(self, item: OutboxItem) -> dict[str, Any]:
        """The subject and text to send, only where they differ from the item's."""
        changes: dict[str, Any] = {}
        if self.cleaned_data["subject"] != item.subject:
            changes["subject"] = self.cleaned_data["subject"]
        if not _same_text(self.cleaned_data["text"], item.text):
            changes["text"] = self.cleaned_data["text"].replace("\r\n", "\n")
        return changes


class RejectForm(forms.Form):
    """Reject, with a note telling the agent why."""

    prefix = "reject"

    note = forms.CharField(
        label="Why not? (optional)",
        max_length=2000,
        required=False,
        widget=forms.Textarea(attrs={"data-field": "note", "rows": 3}),
        help_text="Kept with the decision and shown to the agent.",
    )


class AgentKeyForm(DashboardForm):
    """The "Connect an agent" page's key: an ``agent`` key with the scopes an agent needs, and
    its mail behind approval unless the person creating it says otherwise."""

    name = forms.CharField(
        max_length=200,
        initial="mcp-agent",
        help_text="So you can tell this agent's key apart later.",
    )
    scopes = forms.MultipleChoiceField(
        choices=[
            ("read", "read: wait for mail, read it, get codes"),
            ("write", "write: create and delete inboxes, mark mail (includes read)"),
            ("send", "send: send mail from inboxes"),
        ],
        initial=["read", "write"],
        widget=forms.CheckboxSelectMultiple,
        error_messages={"required": "Choose at least one scope."},
    )
    require_approval = forms.BooleanField(
        label="A person approves every message the agent sends",
        required=False,
        initial=True,
        help_text="Recommended: received mail can tell the agent to send things (docs/agents.md).",
    )

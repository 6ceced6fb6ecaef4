"""Dashboard forms of the webhooks app: an endpoint's URL, event types and filters.

Validation is the API's own (``EndpointCreateIn`` / ``EndpointUpdateIn``: URL form, the SSRF
check of ``webhooks.targets``, event names), so the dashboard accepts what ``POST /webhooks``
accepts; issues land on the field their path names.
"""

from __future__ import annotations

from typing import Any

from django import forms

from config.api.errors import flatten_issues
from config.forms import DashboardForm
from webhooks.serializers import EndpointCreateIn, EndpointUpdateIn
from webhooks.services import WEBHOOK_EVENTS

EVENT_HELP = {
    "email.received": "a message was stored and processed (labels included)",
    "email.labeled": "labels were applied by a rule or the classifier",
    "inbox.created": "an inbox was created (API, dashboard or catch-all)",
    "inbox.expired": "a disposable inbox reached its expiry",
    "inbox.deleted": "an inbox was deleted with its mail (a request, or retention after expiry)",
    "outbound.pending": "an outgoing message waits for approval",
    "outbound.sent": "an outgoing message was sent",
    "outbound.rejected": "an outgoing message was rejected by an approver",
    "outbound.failed": "an outgoing message could not be delivered",
}


class EndpointForm(DashboardForm):
    url = forms.CharField(
        label="URL",
        max_length=2000,
        help_text="Where Pigeonhole POSTs each event (http or https). Private and loopback "
        "addresses are refused unless the instance allows them.",
        widget=forms.URLInput(
            attrs={"placeholder": "https://example.com/hooks/pigeonhole", "autocomplete": "off"}
        ),
    )
    events = forms.MultipleChoiceField(
        label="Events",
        choices=[(name, f"{name} — {EVENT_HELP[name]}") for name in WEBHOOK_EVENTS],
        initial=["email.received"],
        widget=forms.CheckboxSelectMultiple,
        error_messages={"required": "Choose at least one event."},
    )
    inbox_ids = forms.MultipleChoiceField(
        label="Only these inboxes",
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="None ticked: events of every inbox.",
    )
    label_keys = forms.MultipleChoiceField(
        label="Only emails with these labels",
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="For email.* events; none ticked: every email. For email.labeled, one of "
        "them must be among the labels just applied.",
    )
    enabled = forms.BooleanField(
        label="Enabled", required=False, initial=True, help_text="Disabled endpoints get nothing."
    )

    def __init__(
        self,
        *args: Any,
        inboxes: list[tuple[str, str]],
        labels: list[tuple[str, str]],
        creating: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.creating = creating
        self.fields["inbox_ids"].choices = inboxes
        self.fields["label_keys"].choices = [(key, f"{key} ({name})") for key, name in labels]
        if not inboxes:
            self.fields["inbox_ids"].help_text = "This workspace has no inboxes yet."
        if not labels:
            self.fields["label_keys"].help_text = "This workspace has no labels yet."
        self.validated: dict[str, Any] = {}

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        if self.errors:
            return cleaned
        data = {name: cleaned[name] for name in self.fields if name in cleaned}
        serializer = (EndpointCreateIn if self.creating else EndpointUpdateIn)(data=data)
        if serializer.is_valid():
            self.validated = dict(serializer.validated_data)
        else:
            for issue in flatten_issues(serializer.errors):
                self.add_issue(issue["path"], issue["message"])
        return cleaned

    def add_issue(self, path: str, message: str) -> None:
        """A coded-error issue on the field its path names (``inbox_ids.0`` → inbox_ids)."""
        field = path.split(".", 1)[0]
        self.add_error(field if field in self.fields else None, message)

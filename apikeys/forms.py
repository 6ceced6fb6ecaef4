"""Dashboard forms of the tenancy app: sign-in, invitations, changing roles, switching."""

from __future__ import annotations

from django import forms
from django.contrib.auth import password_validation
from django.contrib.auth.forms import AuthenticationForm

from apikeys.models import MAX_AGE_DAYS, MAX_GRACE_HOURS, KeyKind, Role, Scope
from config.forms import DashboardForm


class EmailAuthenticationForm(AuthenticationForm):
    """Django's sign-in form; the user name is the e-mail address (field ``username``)."""

    username = forms.CharField(
        label="E-mail",
        max_length=254,
        widget=forms.EmailInput(attrs={"autofocus": True, "autocomplete": "email"}),
    )
    error_messages = {
        **AuthenticationForm.error_messages,
        "invalid_login": "That e-mail and password didn't match. Check both and try again.",
    }

    def clean_username(self) -> str:
        return self.cleaned_data["username"].strip().lower()


class MemberInviteForm(DashboardForm):
    """Invites a person by e-mail with a role; they choose their own password (or sign in)."""

    email = forms.EmailField(label="E-mail", widget=forms.EmailInput(attrs={"autocomplete": "off"}))
    role = forms.ChoiceField(label="Role", choices=Role.choices, initial=Role.MEMBER)

    def __init__(self, *args: object, can_grant_owner: bool = True, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        if not can_grant_owner:
            self.fields["role"].choices = [c for c in Role.choices if c[0] != Role.OWNER]


class InvitationPasswordForm(DashboardForm):
    """The invitee's own password, typed twice; Django's password validators apply."""

    password = forms.CharField(
        label="Choose a password",
        strip=False,
        widget=forms.PasswordInput(attrs={"autocomplete": "new-password", "autofocus": True}),
        help_text=password_validation.password_validators_help_text_html(),
    )
    password_again = forms.CharField(
        label="Type it again",
        strip=False,
        widget=forms.PasswordInput(attrs={"autocomplete": "new-password"}),
    )

    def clean(self) -> dict[str, object]:
        data = super().clean() or {}
        if data.get("password") and data.get("password") != data.get("password_again"):
            self.add_error("password_again", "The two passwords differ. Type the same one twice.")
        return data


class MemberRoleForm(forms.Form):
    role = forms.ChoiceField(label="Role", choices=Role.choices)


class WorkspaceSwitchForm(forms.Form):
    workspace = forms.CharField(max_length=32)
    next = forms.CharField(required=False, max_length=500)


SCOPE_HELP = {
    Scope.READ: "read: list and read inboxes, emails, labels, webhooks, stats.",
    Scope.WRITE: "write: create, change and delete inboxes and emails (includes read).",
    Scope.SEND: "send: send mail from inboxes (nothing else; add read to see the outbox).",
    Scope.ADMIN: "admin: labels, webhooks and API keys (includes read, write and send).",
}
KIND_HELP = (
    "agent: software acting on its own; ci: a test pipeline; personal: your own scripts. "
    "The kind is a label for you; it does not change what the key may do."
)


class KeyCreateForm(DashboardForm):
    """The dashboard's face of POST /keys: the same fields, defaults and limits as the API."""

    name = forms.CharField(
        label="Name",
        max_length=200,
        widget=forms.TextInput(attrs={"autocomplete": "off", "placeholder": "e.g. signup-bot"}),
        help_text="So you can tell keys apart later.",
    )
    kind = forms.ChoiceField(
        label="Kind", choices=KeyKind.choices, initial=KeyKind.AGENT, help_text=KIND_HELP
    )
    scopes = forms.MultipleChoiceField(
        label="Scopes",
        choices=[(s.value, SCOPE_HELP[s]) for s in Scope],
        initial=["read", "write"],
        widget=forms.CheckboxSelectMultiple,
        help_text="admin includes read, write and send; write includes read; send includes "
        "nothing else. Give a key only what it needs.",
        error_messages={"required": "Choose at least one scope."},
    )
    require_approval = forms.BooleanField(
        label="Mail sent with this key waits for approval",
        required=False,
        help_text="An owner or admin approves or rejects each message under Approvals.",
    )
    expires_in_days = forms.IntegerField(
        label="Expires after (days)",
        required=False,
        min_value=1,
        max_value=3650,
        widget=forms.NumberInput(attrs={"placeholder": "never"}),
        help_text="1 to 3650 days. Leave empty for a key that never expires.",
    )

    def clean_name(self) -> str:
        name = self.cleaned_data["name"].strip()
        if not name:
            raise forms.ValidationError("Give the key a name.")
        return name


class KeyApprovalForm(forms.Form):
    """PATCH /keys/{id}: whether mail sent with the key waits for approval."""

    require_approval = forms.BooleanField(required=False)


class WorkspaceDeleteForm(DashboardForm):
    """Deleting a workspace: its name, typed again."""

    confirm = forms.CharField(label="Type the workspace's name to confirm", max_length=200)


class WorkspaceSettingsForm(DashboardForm):
    """The workspace's own settings (``max_inboxes`` is the operator's and not here)."""

    name = forms.CharField(label="Workspace name", max_length=200)
    require_approval = forms.BooleanField(
        label="Every email sent from this workspace waits for approval",
        required=False,
        help_text="On: all outgoing mail, from any key or person, is held as pending until an "
        "owner or admin approves it under Approvals. Off: only keys marked for approval wait.",
    )
    classifier_enabled = forms.BooleanField(
        label="Classifier answers the questions of labels with instructions",
        required=False,
        help_text="Off: labels apply by their rules only; instructions are ignored.",
    )
    allow_permanent_inboxes = forms.BooleanField(
        label="Permanent inboxes allowed",
        required=False,
        help_text="Off: every inbox must expire. An inbox created without a time to live gets "
        "60 minutes, and asking for a permanent one is refused (feature_disabled).",
    )
    expired_inbox_grace_hours = forms.IntegerField(
        label="Hours an expired inbox is kept",
        required=False,
        min_value=0,
        max_value=MAX_GRACE_HOURS,
        help_text="Then it is deleted with all its mail (inbox.deleted). 0 deletes it at expiry; "
        "until then it stays readable by id and extending it makes it active again (empty: "
        "unchanged).",
    )
    email_retention_days = forms.IntegerField(
        label="Days mail is kept",
        required=False,
        min_value=1,
        max_value=MAX_AGE_DAYS,
        help_text="Mail older than this is deleted from every inbox, permanent ones included. "
        "Empty: mail is kept as long as its inbox.",
    )
    audit_retention_days = forms.IntegerField(
        label="Keep the audit log for (days)",
        min_value=1,
        max_value=3650,
        required=False,
        help_text="Older entries are deleted by a daily sweep (empty: unchanged).",
    )

    def clean_name(self) -> str:
        name = self.cleaned_data["name"].strip()
        if not name:
            raise forms.ValidationError("Give the workspace a name.")
        return name

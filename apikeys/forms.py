"""Dashboard forms of the tenancy app: sign-in, adding members, changing roles, switching."""

from __future__ import annotations

from django import forms
from django.contrib.auth import password_validation
from django.contrib.auth.forms import AuthenticationForm

from apikeys.models import Role


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


class MemberAddForm(forms.Form):
    email = forms.EmailField(label="E-mail", widget=forms.EmailInput(attrs={"autocomplete": "off"}))
    role = forms.ChoiceField(label="Role", choices=Role.choices, initial=Role.MEMBER)
    password = forms.CharField(
        label="First password",
        required=False,
        strip=False,
        widget=forms.PasswordInput(attrs={"autocomplete": "new-password"}),
        help_text="Only for someone without an account yet; tell them to change it after "
        "signing in. An existing account keeps its own password.",
    )

    def __init__(self, *args: object, can_grant_owner: bool = True, **kwargs: object) -> None:
        kwargs.setdefault("label_suffix", "")
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        if not can_grant_owner:
            self.fields["role"].choices = [c for c in Role.choices if c[0] != Role.OWNER]

    def clean_password(self) -> str:
        password = self.cleaned_data.get("password") or ""
        if password:
            password_validation.validate_password(password)
        return password


class MemberRoleForm(forms.Form):
    role = forms.ChoiceField(label="Role", choices=Role.choices)


class WorkspaceSwitchForm(forms.Form):
    workspace = forms.CharField(max_length=32)
    next = forms.CharField(required=False, max_length=500)

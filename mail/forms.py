"""Dashboard forms of the mail app."""

from __future__ import annotations

from typing import Any

from django import forms


class EmailSearchForm(forms.Form):
    q = forms.CharField(required=False, max_length=200, label="Search this inbox")
    unread = forms.BooleanField(required=False, label="Unread only")


class EmailReadForm(forms.Form):
    read = forms.TypedChoiceField(
        coerce=lambda v: v == "1", choices=[("1", "read"), ("0", "unread")]
    )


class LabelAddForm(forms.Form):
    key = forms.ChoiceField(label="Add a label")

    def __init__(self, *args: Any, choices: list[tuple[str, str]], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["key"].choices = choices

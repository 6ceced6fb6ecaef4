"""The dashboard's form base: Django's forms with the project's label style."""

from __future__ import annotations

from typing import Any

from django import forms


class DashboardForm(forms.Form):
    """A form of the dashboard. Its labels carry no trailing colon (Django's default
    ``label_suffix``): the templates set each label above its field, as a heading."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("label_suffix", "")
        super().__init__(*args, **kwargs)

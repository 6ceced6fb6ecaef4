"""JSON list fields as the services read them: lists of strings (an inbox's tags and sender
rules, a webhook endpoint's subscriptions). The API and the dashboard only store lists; the
Django admin edits these fields as raw JSON, so the models' ``clean`` (which the admin's forms
run) checks them here. A string stored there would be iterated character by character or
matched by substring, silently unlike what the operator typed."""

from __future__ import annotations

from typing import Any

MESSAGE = 'A JSON list of strings, e.g. [] or ["a", "b"].'


def is_string_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def string_list_errors(instance: Any, *names: str) -> dict[str, str]:
    """The fields among ``names`` of ``instance`` that are not lists of strings, with the
    message for each."""
    return {name: MESSAGE for name in names if not is_string_list(getattr(instance, name))}

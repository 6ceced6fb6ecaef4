"""Query-string validation through DRF serializers, so query errors share the body's envelope.

The query string is read strictly, as the OpenAPI document describes it: each parameter at most
once (a repeated one is a ``validation_error``: which of two limits did the client mean?), a
boolean is ``true`` or ``false``, an integer is digits with an optional minus sign (no ``5.0``,
no blanks), a maximum length is measured on the value as sent (DRF measures after trimming),
and an empty value is a value (``?tag=`` is a blank tag, refused where blanks are) — DRF's
HTML-form reading would treat a blank as "not given" and ``1``/``yes``/``on`` as true.
Unknown parameters are ignored.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from rest_framework import serializers
from rest_framework.request import Request

_INTEGER = re.compile(r"-?[0-9]+")


class PageQuery(serializers.Serializer):
    """``limit`` and ``cursor``; subclasses set the limits of their list."""

    default_limit = 50
    max_limit = 200

    cursor = serializers.CharField(required=False, allow_blank=True, max_length=200)

    def get_fields(self) -> dict[str, serializers.Field]:
        fields = super().get_fields()
        fields["limit"] = serializers.IntegerField(
            required=False, min_value=1, max_value=self.max_limit, default=self.default_limit
        )
        return fields


def _form_problem(field: serializers.Field, value: str) -> str | None:
    if isinstance(field, serializers.BooleanField):
        return None if value in ("true", "false") else "Must be true or false."
    if isinstance(field, serializers.IntegerField):
        return None if _INTEGER.fullmatch(value) else "Must be an integer."
    limit = getattr(field, "max_length", None)
    if limit is not None and len(value) > limit:  # as sent: DRF measures after trimming
        return f"Ensure this field has no more than {limit} characters."
    return None


def validate_query(
    serializer_class: type[serializers.Serializer], pairs: Iterable[tuple[str, str]]
) -> dict[str, Any]:
    """Validated query parameters from ``(name, value)`` pairs in order of appearance; a bad
    one raises ``validation_error`` with its name as path. Shared by the DRF views and the raw
    ASGI endpoints (wait, stream)."""
    serializer = serializer_class()
    fields = serializer.fields
    values: dict[str, str] = {}
    problems: dict[str, str] = {}
    for name, value in pairs:
        if name not in fields:
            continue
        if name in values:
            problems[name] = "Given more than once."
            continue
        values[name] = value
        problem = _form_problem(fields[name], value)
        if problem is not None:
            problems[name] = problem
    if problems:
        raise serializers.ValidationError(problems)
    serializer = serializer_class(data=values)
    serializer.is_valid(raise_exception=True)
    return dict(serializer.validated_data)


def parse_query(serializer_class: type[serializers.Serializer], request: Request) -> dict[str, Any]:
    """Validated query parameters; a bad one raises ``validation_error`` with its name as path."""
    params: Mapping[str, list[str]] = request.query_params
    pairs = [(name, value) for name, values in params.lists() for value in values]
    return validate_query(serializer_class, pairs)

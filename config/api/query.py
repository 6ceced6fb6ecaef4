"""Query-string validation through DRF serializers, so query errors share the body's envelope.

The query string is read strictly, as the OpenAPI document describes it: each parameter at most
once (a repeated one is a ``validation_error``: which of two limits did the client mean?) unless
the serializer declares it a ``ListField`` (the wait's repeatable ``header``), a
boolean is ``true`` or ``false``, an integer is digits with an optional minus sign (no ``5.0``,
no blanks), a maximum length is measured on the value as sent (DRF measures after trimming),
and an empty value is a value (``?tag=`` is a blank tag, refused where blanks are) — DRF's
HTML-form reading would treat a blank as "not given" and ``1``/``yes``/``on`` as true.

An unknown parameter is a ``validation_error`` naming it: ``?inbox_id=`` on ``GET /emails``
(whose filter is ``inbox``) once answered with every inbox's mail, and a typo must never widen a
query. DRF views declare the query of each method (``query = {"GET": EmailListQuery}``, beside
``scopes``); :class:`KnownQueryOnly` refuses every other name before the handler runs, on every
method (an operation without a declared query takes none), and ``ScopedAutoSchema`` documents
the same serializer, so the document and the check never disagree. The raw ASGI endpoints (wait,
stream) go through :func:`validate_query`, which refuses unknown names too.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any

from rest_framework import serializers
from rest_framework.permissions import BasePermission
from rest_framework.request import Request

from config.api.inputs import invalid_choice, validated

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
    return invalid_choice(field, value)


def unknown_parameter(known: Iterable[str]) -> str:
    """The issue message of an unknown query parameter: what the operation takes instead."""
    names = sorted(known)
    if not names:
        return "Unknown query parameter: this operation takes none."
    return "Unknown query parameter: this operation takes " + ", ".join(names) + "."


def validate_query(
    serializer_class: type[serializers.Serializer], pairs: Iterable[tuple[str, str]]
) -> dict[str, Any]:
    """Validated query parameters from ``(name, value)`` pairs in order of appearance; a bad
    one raises ``validation_error`` with its name as path. Shared by the DRF views and the raw
    ASGI endpoints (wait, stream)."""
    fields = _fields_of(serializer_class)
    values: dict[str, Any] = {}
    problems: dict[str, str] = {}
    for name, value in pairs:
        if name not in fields:
            problems[name] = unknown_parameter(fields)
            continue
        field = fields[name]
        if isinstance(field, serializers.ListField):  # repeatable: each value is an item
            values.setdefault(name, []).append(value)
            field = field.child
        elif name in values:
            problems[name] = "Given more than once."
            continue
        else:
            values[name] = value
        problem = _form_problem(field, value)
        if problem is not None:
            problems[name] = problem
    if problems:
        raise serializers.ValidationError(problems)
    if not values:
        defaults = _defaults_of(serializer_class)
        if defaults is not None:
            return dict(defaults)
    return validated(serializer_class, values)


_IMMUTABLE = (type(None), bool, int, float, str)


@functools.cache
def _defaults_of(serializer_class: type[serializers.Serializer]) -> Mapping[str, Any] | None:
    """What an empty query validates to, worked out once per class, when it cannot differ
    between requests; else None, and every empty query is validated as any other.

    It cannot differ when no field is required, no default is callable (a time, say) or
    worked out by the field (``get_default``), the class adds no validation of its own
    (``validate``, ``validate_<name>``, ``to_internal_value``, ``run_validation``) and every value
    is immutable. Most requests send no query at all (``GET /emails/{id}``), and validating
    nothing through a DRF serializer was about a tenth of such a request's CPU (issue 32)."""
    fields = _fields_of(serializer_class)
    for method in ("validate", "to_internal_value", "run_validation"):
        if getattr(serializer_class, method) is not getattr(serializers.Serializer, method):
            return None
    for name, field in fields.items():
        if (
            type(field).get_default is not serializers.Field.get_default
            or field.required
            or (field.default is not serializers.empty and callable(field.default))
            or hasattr(serializer_class, f"validate_{name}")
        ):
            return None
    try:
        result = validated(serializer_class, {})
    except serializers.ValidationError:
        return None
    if not all(isinstance(value, _IMMUTABLE) for value in result.values()):
        return None
    return MappingProxyType(result)


@functools.cache
def _fields_of(serializer_class: type[serializers.Serializer]) -> Mapping[str, serializers.Field]:
    """The fields of a query serializer, built once per class and only read (names, kinds,
    limits, choices): DRF deep-copies its declared fields for every instance, and a request
    built two or three of them before the one that validates."""
    return MappingProxyType(dict(serializer_class().fields))


def parse_query(serializer_class: type[serializers.Serializer], request: Request) -> dict[str, Any]:
    """Validated query parameters; a bad one raises ``validation_error`` with its name as path."""
    params: Mapping[str, list[str]] = request.query_params
    pairs = [(name, value) for name, values in params.lists() for value in values]
    return validate_query(serializer_class, pairs)


def declared_query(view: Any, method: str) -> type[serializers.Serializer] | None:
    """The query serializer ``view`` declares for ``method`` (``view.query``), if any."""
    method = "GET" if method.upper() == "HEAD" else method.upper()
    return (getattr(view, "query", None) or {}).get(method)


class KnownQueryOnly(BasePermission):
    """Refuses, before the handler runs, a query parameter the view does not declare for the
    method (``view.query``); an operation without a declared query takes no parameter at all.

    A permission so it runs on every view after authentication and the scope check (401 and
    403 come first, as for any other request), before anything is read or written.
    """

    def has_permission(self, request: Request, view: Any) -> bool:
        if not hasattr(view, request.method.lower()):
            return True  # a method the view does not serve: DRF answers 405
        declared = declared_query(view, request.method)
        known = _fields_of(declared).keys() if declared is not None else ()
        unknown = [name for name in request.query_params if name not in known]
        if unknown:
            raise serializers.ValidationError({name: unknown_parameter(known) for name in unknown})
        return True

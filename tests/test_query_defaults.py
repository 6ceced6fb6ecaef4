"""An empty query string is answered from defaults worked out once per query serializer
(``config.api.query._defaults_of``, issue 32), and only where that cannot change the answer: the
cached defaults equal what DRF validates, a caller's changes never reach the next request, and
a serializer with a callable default or validation of its own is validated every time."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from django.urls import URLPattern, URLResolver, get_resolver
from rest_framework import serializers

from config.api.inputs import validated
from config.api.query import _defaults_of, validate_query
from mail.api import EmailReadQuery


def _declared_queries() -> list[type[serializers.Serializer]]:
    found: dict[str, type[serializers.Serializer]] = {}

    def walk(patterns: list[Any]) -> None:
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                walk(pattern.url_patterns)
            elif isinstance(pattern, URLPattern):
                view = getattr(pattern.callback, "view_class", None)
                for serializer_class in (getattr(view, "query", None) or {}).values():
                    found[serializer_class.__qualname__] = serializer_class

    walk(get_resolver().url_patterns)
    return [found[name] for name in sorted(found)]


def _raw_endpoint_queries() -> list[type[serializers.Serializer]]:
    from mail.realtime import StreamQuery
    from mail.waiting import EmailsWaitQuery, WaitQuery

    return [StreamQuery, WaitQuery, EmailsWaitQuery]


QUERIES = _declared_queries() + _raw_endpoint_queries()


def test_the_walk_finds_the_declared_queries() -> None:
    assert len(QUERIES) >= 10
    assert EmailReadQuery in QUERIES


@pytest.mark.parametrize("serializer_class", QUERIES, ids=lambda c: c.__qualname__)
def test_an_empty_query_gets_what_drf_validates(serializer_class: type) -> None:
    assert validate_query(serializer_class, []) == validated(serializer_class, {})


def test_the_read_of_one_email_takes_the_cached_defaults_and_callers_cannot_change_them() -> None:
    assert _defaults_of(EmailReadQuery) == {"mark_read": False}
    first = validate_query(EmailReadQuery, [])
    first["mark_read"] = True
    assert validate_query(EmailReadQuery, []) == {"mark_read": False}
    assert validate_query(EmailReadQuery, [("mark_read", "true")]) == {"mark_read": True}


_counter = itertools.count()


class CallableDefault(serializers.Serializer):
    n = serializers.IntegerField(required=False, default=lambda: next(_counter))


class OwnValidation(serializers.Serializer):
    limit = serializers.IntegerField(required=False, default=5)
    calls: list[int] = []

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(1)
        return attrs


class FieldValidation(serializers.Serializer):
    limit = serializers.IntegerField(required=False, default=5)

    def validate_limit(self, value: int) -> int:
        raise serializers.ValidationError("Never on Sundays.")


class OwnInternalValue(serializers.Serializer):
    limit = serializers.IntegerField(required=False, default=5)

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        return {**super().to_internal_value(data), "n": next(_counter)}


class CountingField(serializers.IntegerField):
    def get_default(self) -> int:
        return next(_counter)


class FieldDefault(serializers.Serializer):
    n = CountingField(required=False, default=0)


class Required(serializers.Serializer):
    q = serializers.CharField()


def test_a_callable_default_is_called_for_every_query() -> None:
    assert _defaults_of(CallableDefault) is None
    assert validate_query(CallableDefault, []) != validate_query(CallableDefault, [])


def test_a_serializers_own_validation_runs_for_every_query() -> None:
    assert _defaults_of(OwnValidation) is None
    validate_query(OwnValidation, [])
    validate_query(OwnValidation, [])
    assert len(OwnValidation.calls) == 2
    assert _defaults_of(FieldValidation) is None


def test_a_serializer_or_field_that_works_out_its_own_values_is_validated_every_time() -> None:
    for serializer_class in (OwnInternalValue, FieldDefault):
        assert _defaults_of(serializer_class) is None
        assert validate_query(serializer_class, []) != validate_query(serializer_class, [])


def test_a_required_parameter_is_refused_every_time() -> None:
    assert _defaults_of(Required) is None
    for _ in range(2):
        with pytest.raises(serializers.ValidationError):
            validate_query(Required, [])

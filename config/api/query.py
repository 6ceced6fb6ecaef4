"""Query-string validation through DRF serializers, so query errors share the body's envelope."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers
from rest_framework.request import Request


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


def parse_query(serializer_class: type[serializers.Serializer], request: Request) -> dict[str, Any]:
    """Validated query parameters; a bad one raises ``validation_error`` with its name as path."""
    serializer = serializer_class(data=request.query_params)
    serializer.is_valid(raise_exception=True)
    return dict(serializer.validated_data)

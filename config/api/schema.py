"""OpenAPI helpers: the error envelope component, common responses and per-operation scopes.

Views declare ``scopes = {"GET": "read", "POST": "write"}``. :class:`ScopedAutoSchema` turns that
into the operation's security requirement (``bearerAuth: [scope]``; OpenAPI 3.1 allows roles on
non-OAuth schemes), an ``x-required-scope`` extension, a line in the description, and the error
responses every authenticated operation can give (401, 403, 429, and 404 when the path has ids).
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import OpenApiResponse
from rest_framework import serializers


class ErrorIssueOut(serializers.Serializer):
    path = serializers.CharField(help_text="Dotted path of the offending field or query parameter.")
    message = serializers.CharField()


class ErrorBodyOut(serializers.Serializer):
    code = serializers.CharField(help_text="Stable machine-readable error code.")
    message = serializers.CharField(help_text="Human-readable explanation.")
    issues = ErrorIssueOut(many=True, required=False, help_text="Only for validation_error.")


class ErrorOut(serializers.Serializer):
    error = ErrorBodyOut()


class DeletedOut(serializers.Serializer):
    deleted = serializers.BooleanField()
    id = serializers.CharField()


def error(description: str) -> OpenApiResponse:
    return OpenApiResponse(ErrorOut, description=description)


_COMMON = {
    "401": "unauthorized: missing, malformed, unknown, revoked or expired credential.",
    "403": "insufficient_scope (key lacks the scope), forbidden, or feature_disabled.",
    "429": "rate_limited (with Retry-After) or limit_reached.",
}


class ScopedAutoSchema(AutoSchema):
    """AutoSchema that documents each operation's scope and common error responses."""

    def _scope(self) -> str | None:
        scopes = getattr(self.view, "scopes", None) or {}
        return scopes.get(self.method.upper())

    def get_operation(self, *args: Any, **kwargs: Any) -> dict[str, Any] | None:
        operation = super().get_operation(*args, **kwargs)
        if operation is None:
            return None
        scope = self._scope()
        if scope:
            operation["security"] = [{"bearerAuth": [scope]}, {"sessionAuth": [scope]}]
            operation["x-required-scope"] = scope
            line = f"Required scope: `{scope}`."
            description = operation.get("description", "")
            operation["description"] = f"{description}\n\n{line}".strip()
            responses = operation.setdefault("responses", {})
            ref = self.resolve_serializer(ErrorOut, "response").ref
            content = {"application/json": {"schema": ref}}
            for status, text in _COMMON.items():
                responses.setdefault(status, {"description": text, "content": content})
            if "{" in self.path:
                responses.setdefault(
                    "404",
                    {
                        "description": "not_found: no such object in your workspace.",
                        "content": content,
                    },
                )
            responses.setdefault(
                "400",
                {"description": "validation_error or invalid_json.", "content": content},
            )
        return operation

    def get_tags(self) -> list[str]:
        tags = getattr(self.view, "tags", None)
        return list(tags) if tags else super().get_tags()


_PAGES: dict[type[serializers.Serializer], type[serializers.Serializer]] = {}


def page_of(item: type[serializers.Serializer]) -> type[serializers.Serializer]:
    """The ``{data, next_cursor}`` serializer for a list of ``item`` (one component per item)."""
    if item not in _PAGES:
        name = item.__name__.removesuffix("Out") + "PageOut"
        _PAGES[item] = type(
            name,
            (serializers.Serializer,),
            {
                "data": item(many=True),
                "next_cursor": serializers.CharField(
                    allow_null=True,
                    help_text="Pass as `cursor` for the next page; null at the end.",
                ),
                "__module__": item.__module__,
            },
        )
    return _PAGES[item]

"""OpenAPI helpers: the error envelope component, error responses and per-operation scopes.

Views declare ``scopes = {"GET": "read", "POST": "write"}``. :class:`ScopedAutoSchema` turns that
into the operation's security requirement (``bearerAuth: [scope]``; OpenAPI 3.1 allows roles on
non-OAuth schemes), an ``x-required-scope`` extension, a line in the description, and the error
responses the operation can give (:func:`error_responses`): the ones every authenticated
operation has (400, 401, 403, 429), the JSON-body ones (400 invalid_json, 415), 404 when the path
has ids, and the domain errors the view lists in ``errors`` — each status with the exact codes
it can carry, so the document and the answers agree.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import OpenApiResponse
from rest_framework import serializers

from config.api.errors import ApiError
from config.api.query import declared_query


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


ErrorSpec = type[ApiError] | tuple[int, str]

# What every authenticated operation can answer, whatever it does.
_ALWAYS: tuple[tuple[int, str], ...] = (
    (400, "validation_error"),
    (401, "unauthorized"),
    (403, "insufficient_scope"),
    (403, "forbidden"),
    (429, "rate_limited"),
)
# An operation with a JSON request body also answers these.
_WITH_BODY: tuple[tuple[int, str], ...] = (
    (400, "invalid_json"),
    (413, "payload_too_large"),
    (415, "unsupported_media_type"),
)
_STATUS_TEXT = {
    400: "The request is not valid",
    401: "Missing, malformed, unknown, revoked or expired credential",
    403: "Refused: the key lacks the scope (insufficient_scope), the credential may not do "
    "this (forbidden), or the workspace has the feature off (feature_disabled)",
    404: "No such object in your workspace",
    409: "Conflicts with the current state",
    413: "The body is larger than the instance accepts (DATA_UPLOAD_MAX_MEMORY_SIZE)",
    414: "The request line is longer than 16,384 bytes (many or long query filters)",
    415: "The body is not application/json",
    429: "Too many requests (rate_limited, with Retry-After) or a quota is reached (limit_reached)",
}


def _pair(spec: ErrorSpec) -> tuple[int, str]:
    return spec if isinstance(spec, tuple) else (spec.status, spec.code)


def error_responses(
    *, body: bool, path_ids: bool, extra: Iterable[ErrorSpec] = ()
) -> dict[str, dict[str, Any]]:
    """The error responses of one operation, by status, each listing its possible codes.

    Every operation answers the errors of ``_ALWAYS``; ``body`` adds the JSON-body errors,
    ``path_ids`` adds 404 ``not_found``, and ``extra`` names the domain errors the operation's
    services raise (``AddressTaken``, ``(404, "not_found")``...). Each response's schema is the
    envelope with ``error.code`` restricted to the codes listed for that status.
    """
    pairs = [*_ALWAYS, *(_WITH_BODY if body else ()), *((404, "not_found"),) * path_ids]
    pairs += [_pair(spec) for spec in extra]
    by_status: dict[int, list[str]] = {}
    for status, code in pairs:
        codes = by_status.setdefault(status, [])
        if code not in codes:
            codes.append(code)
    responses: dict[str, dict[str, Any]] = {}
    for status in sorted(by_status):
        codes = by_status[status]
        schema = {
            "allOf": [
                {"$ref": "#/components/schemas/ErrorOut"},
                {
                    "type": "object",
                    "properties": {
                        "error": {"type": "object", "properties": {"code": {"enum": codes}}}
                    },
                },
            ]
        }
        text = _STATUS_TEXT.get(status, "Error")
        responses[str(status)] = {
            "description": f"{text}: {', '.join(codes)}.",
            "content": {"application/json": {"schema": schema}},
        }
    return responses


def link(operation_id: str, description: str, **parameters: str) -> dict[str, Any]:
    """An OpenAPI link: how the answer of one operation feeds ``operation_id``. Parameters map
    the target's parameter names to runtime expressions (``$response.body#/id``)."""
    return {"operationId": operation_id, "parameters": parameters, "description": description}


class ScopedAutoSchema(AutoSchema):
    """AutoSchema that documents each operation's scope and its error responses.

    Views declare ``scopes = {"GET": "read", ...}``, for the domain errors their services
    raise ``errors = {"POST": [AddressTaken, NoDomain, ...]}``, and for the operations their
    answers feed ``links = {"POST": {"GetInbox": link("getInbox", ..., inbox_id=...)}}``
    (added to every 2xx response; clients and stateful testers follow them).
    """

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
            self.resolve_serializer(ErrorOut, "response")  # registers the component
            extra = (getattr(self.view, "errors", None) or {}).get(self.method.upper(), ())
            responses = operation.setdefault("responses", {})
            for status, response in error_responses(
                body="requestBody" in operation, path_ids="{" in self.path, extra=extra
            ).items():
                responses.setdefault(status, response)
            links = (getattr(self.view, "links", None) or {}).get(self.method.upper())
            if links:
                for status, response in responses.items():
                    if status.startswith("2") and "content" in response:
                        response["links"] = dict(links)
            operation["responses"] = dict(sorted(responses.items()))
        return operation

    def get_override_parameters(self) -> list[Any]:
        # The query the view declares for this method (``view.query``) is the one
        # config.api.query.KnownQueryOnly enforces: documented from the same serializer.
        declared = declared_query(self.view, self.method)
        return [*super().get_override_parameters(), *([declared] if declared else [])]

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

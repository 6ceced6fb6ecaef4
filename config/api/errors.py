"""Coded errors and the one renderer of the error envelope.

Every error the API returns has the shape ``{"error": {"code", "message", "issues"?}}``.
Domain code raises :class:`ApiError` subclasses; DRF's and Django's own exceptions are mapped
to the same envelope here, so no view ever builds an error body by hand.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.views import defaults
from rest_framework import exceptions as drf

if TYPE_CHECKING:
    from rest_framework.response import Response

logger = logging.getLogger(__name__)


class ApiError(Exception):
    """An error with a stable machine-readable ``code`` and an HTTP ``status``."""

    code: str = "internal_error"
    status: int = 500
    message: str = "Something went wrong."

    def __init__(
        self,
        message: str | None = None,
        *,
        issues: list[dict[str, str]] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.message = message or self.message
        self.issues = issues
        self.headers = dict(headers or {})
        super().__init__(self.message)


class ValidationFailed(ApiError):
    code, status, message = "validation_error", 400, "The request is not valid."

    @classmethod
    def at(cls, path: str, message: str) -> ValidationFailed:
        return cls(f"{path}: {message}", issues=[{"path": path, "message": message}])


class InvalidJson(ApiError):
    code, status, message = "invalid_json", 400, "The request body is not valid JSON."


class BadRequest(ApiError):
    code, status, message = "bad_request", 400, "The request is not valid HTTP/1.1."


class Unauthorized(ApiError):
    code, status, message = "unauthorized", 401, "A valid API key is required."


class Forbidden(ApiError):
    code, status, message = "forbidden", 403, "You may not do this."


class InsufficientScope(ApiError):
    code, status = "insufficient_scope", 403

    def __init__(self, scope: str) -> None:
        super().__init__(f"This operation requires the '{scope}' scope.")


class FeatureDisabled(ApiError):
    code, status, message = "feature_disabled", 403, "This feature is disabled for the workspace."


class NotFound(ApiError):
    code, status, message = "not_found", 404, "No such object."


class MethodNotAllowed(ApiError):
    code, status, message = "method_not_allowed", 405, "Method not allowed."


class Conflict(ApiError):
    code, status = "conflict", 409


class PayloadTooLarge(ApiError):
    code, status, message = "payload_too_large", 413, "The request body is too large."


class UriTooLong(ApiError):
    code, status, message = "uri_too_long", 414, "The request line is too long."


class UnsupportedMediaType(ApiError):
    code, status, message = "unsupported_media_type", 415, "Send the body as application/json."


class RateLimited(ApiError):
    code, status, message = "rate_limited", 429, "Too many requests; retry later."


class LimitReached(ApiError):
    code, status, message = "limit_reached", 429, "A quota of the workspace is reached."


class HeadersTooLarge(ApiError):
    code, status, message = "headers_too_large", 431, "The request's header fields are too large."


def envelope(code: str, message: str, issues: list[dict[str, str]] | None = None) -> dict:
    body: dict[str, Any] = {"code": code, "message": message}
    if issues is not None:
        body["issues"] = issues
    return {"error": body}


def flatten_issues(detail: Any, prefix: str = "") -> list[dict[str, str]]:
    """Turn DRF's nested error detail into ``[{path, message}]`` with dotted paths."""
    issues: list[dict[str, str]] = []
    if isinstance(detail, Mapping):
        for key, value in detail.items():
            name = "" if key == "non_field_errors" else str(key)
            path = f"{prefix}.{name}" if prefix and name else (prefix or name)
            issues.extend(flatten_issues(value, path))
    elif isinstance(detail, list | tuple):
        if detail and all(isinstance(d, str) for d in detail):
            issues.extend({"path": prefix, "message": str(d)} for d in detail)
        else:
            for index, value in enumerate(detail):
                if value in ({}, [], None, ""):
                    continue
                issues.extend(flatten_issues(value, f"{prefix}.{index}" if prefix else str(index)))
    else:
        issues.append({"path": prefix, "message": str(detail)})
    return issues


def _summary(issues: Iterable[dict[str, str]]) -> str:
    parts = [
        f"{i['path']}: {i['message'].rstrip('.')}" if i["path"] else i["message"].rstrip(".")
        for i in issues
    ]
    return "; ".join(parts)[:500] or "The request is not valid."


def to_api_error(exc: Exception) -> ApiError | None:
    """Map any exception the API can raise to an :class:`ApiError` (None: not ours to map)."""
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, drf.ValidationError):
        # One issue per offending path: the first message DRF gives for it.
        issues = list({i["path"]: i for i in reversed(flatten_issues(exc.detail))}.values())[::-1]
        return ValidationFailed(_summary(issues), issues=issues)
    if isinstance(exc, drf.ParseError):
        return InvalidJson()
    if isinstance(exc, drf.NotAuthenticated | drf.AuthenticationFailed):
        return Unauthorized(str(exc.detail) if isinstance(exc, drf.AuthenticationFailed) else None)
    if isinstance(exc, drf.Throttled):
        wait = max(1, int(exc.wait or 1))
        return RateLimited(headers={"Retry-After": str(wait)})
    if isinstance(exc, drf.PermissionDenied | DjangoPermissionDenied):
        return Forbidden()
    if isinstance(exc, drf.NotFound | Http404):
        return NotFound()
    if isinstance(exc, drf.MethodNotAllowed):
        return MethodNotAllowed()
    if isinstance(exc, drf.UnsupportedMediaType):
        return UnsupportedMediaType()
    if isinstance(exc, RequestDataTooBig):
        from django.conf import settings

        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        return PayloadTooLarge(f"The request body is larger than {limit} bytes.")
    if isinstance(exc, drf.NotAcceptable):
        return ApiError("Only application/json responses are available.")
    return None


def exception_handler(exc: Exception, context: Mapping[str, Any]) -> Response:
    """DRF's EXCEPTION_HANDLER: every exception becomes the envelope; unknown ones are 500s."""
    # Imported here: DRF's Response brings its serializers and their optional libraries
    # (requests, Pygments), a tenth of the start of a process that never renders one (the
    # smtpd imports this module for the domain errors' classes).
    from rest_framework.response import Response

    error = to_api_error(exc)
    if error is None:
        logger.exception("Unhandled API error", exc_info=exc)
        error = ApiError()
    if isinstance(exc, drf.NotAcceptable):
        error.status, error.code = 406, "not_acceptable"
    headers = dict(error.headers)
    if error.status == 401:
        headers.setdefault("WWW-Authenticate", 'Bearer realm="pigeonhole"')
    return Response(
        envelope(error.code, error.message, error.issues), status=error.status, headers=headers
    )


def json_error(error: ApiError) -> JsonResponse:
    """The envelope as a plain Django response (for views and handlers outside DRF)."""
    response = JsonResponse(envelope(error.code, error.message, error.issues), status=error.status)
    for name, value in error.headers.items():
        response[name] = value
    return response


def _is_api(request: HttpRequest) -> bool:
    return request.path.startswith("/api/")


def handler404(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """Django's 404 handler: the envelope under /api/, the HTML page elsewhere."""
    if _is_api(request):
        return json_error(NotFound("No such path."))
    return defaults.page_not_found(request, exception or Http404())


def handler500(request: HttpRequest) -> HttpResponse:
    if _is_api(request):
        return json_error(ApiError())
    return defaults.server_error(request)

"""Exceptions: one class per error ``code`` of the API's envelope, under :class:`PigeonholeError`.

The server answers every error as ``{"error": {"code", "message", "issues"?}}``; the client raises
the class registered for that code (or, for a code it does not know, the class of the HTTP status)
so a caller can ``except NotFound`` instead of comparing strings.
"""

from __future__ import annotations

import email.utils
import time
from typing import Any

import httpx


class PigeonholeError(Exception):
    """An error answered by the API (or, for subclasses without a status, met on the way)."""

    def __init__(
        self,
        message: str,
        *,
        code: str = "error",
        status: int | None = None,
        issues: list[dict[str, Any]] | None = None,
        response: httpx.Response | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.status = status
        self.issues: list[dict[str, Any]] = issues or []
        self.response = response

    def __str__(self) -> str:
        where = f"{self.status} " if self.status else ""
        return f"{where}{self.code}: {self.message}"


class ConfigurationError(PigeonholeError):
    """The client lacks its URL or API key."""


class APIConnectionError(PigeonholeError):
    """The server could not be reached, or the connection dropped, after the retries allowed."""


class WaitTimeout(PigeonholeError, TimeoutError):
    """No matching email arrived within the wait's timeout."""


class BadRequest(PigeonholeError):
    """400 with a code the client does not know."""


class ValidationError(BadRequest):
    """400 ``validation_error``; ``issues`` lists ``{"path", "message"}`` per offending field."""


class InvalidJSON(BadRequest):
    """400 ``invalid_json``."""


class InvalidDomain(BadRequest):
    """400 ``invalid_domain``."""


class UnknownLabel(BadRequest):
    """400 ``unknown_label``."""


class Unauthorized(PigeonholeError):
    """401 ``unauthorized``: the key is missing, wrong, revoked or expired."""


class Forbidden(PigeonholeError):
    """403 ``forbidden``."""


class InsufficientScope(Forbidden):
    """403 ``insufficient_scope``: the key lacks the operation's scope."""


class FeatureDisabled(Forbidden):
    """403 ``feature_disabled``."""


class NotFound(PigeonholeError):
    """404 ``not_found``."""


class Conflict(PigeonholeError):
    """409 with a code the client does not know."""


class AddressTaken(Conflict):
    """409 ``address_taken``."""


class LabelExists(Conflict):
    """409 ``label_exists``."""


class NoDomain(Conflict):
    """409 ``no_domain``."""


class RateLimited(PigeonholeError):
    """429 ``rate_limited``; ``retry_after`` is the server's ``Retry-After`` in seconds."""

    @property
    def retry_after(self) -> float | None:
        return retry_after(self.response) if self.response is not None else None


class LimitReached(RateLimited):
    """429 ``limit_reached``: a quota of the workspace is used up."""


BY_CODE: dict[str, type[PigeonholeError]] = {
    "validation_error": ValidationError,
    "invalid_json": InvalidJSON,
    "invalid_domain": InvalidDomain,
    "unknown_label": UnknownLabel,
    "unauthorized": Unauthorized,
    "forbidden": Forbidden,
    "insufficient_scope": InsufficientScope,
    "feature_disabled": FeatureDisabled,
    "not_found": NotFound,
    "address_taken": AddressTaken,
    "label_exists": LabelExists,
    "no_domain": NoDomain,
    "rate_limited": RateLimited,
    "limit_reached": LimitReached,
}
BY_STATUS: dict[int, type[PigeonholeError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    429: RateLimited,
}


def retry_after(response: httpx.Response) -> float | None:
    """``Retry-After`` in seconds (a number or an HTTP date), or None when absent or unreadable."""
    value = response.headers.get("Retry-After")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def error_from(response: httpx.Response) -> PigeonholeError:
    """The exception for an error response, read from its envelope."""
    code, message, issues = "", "", None
    try:
        body = response.json()
        error = body.get("error") if isinstance(body, dict) else None
        if isinstance(error, dict):
            code = str(error.get("code") or "")
            message = str(error.get("message") or "")
            issues = error.get("issues")
    except ValueError:
        pass
    cls = BY_CODE.get(code) or BY_STATUS.get(response.status_code) or PigeonholeError
    return cls(
        message or response.reason_phrase or "error",
        code=code or f"http_{response.status_code}",
        status=response.status_code,
        issues=issues if isinstance(issues, list) else None,
        response=response,
    )

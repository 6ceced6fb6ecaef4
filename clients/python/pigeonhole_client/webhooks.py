"""Checking a webhook's ``Service-Signature`` on the receiving side.

The server signs each delivery with the endpoint's secret: ``Service-Signature: t=<unix>,v1=<hex>``
where ``v1`` is HMAC-SHA256 over ``"<t>.<raw body>"`` (docs/webhooks.md). A receiver checks the
HMAC in constant time and refuses a ``t`` 300 s or more away from its own clock (a replay).
"""

from __future__ import annotations

import hashlib
import hmac
import time

from .errors import PigeonholeError


class InvalidSignature(PigeonholeError):
    """The ``Service-Signature`` header is missing, malformed, stale or does not match."""


def sign(body: bytes | str, secret: str, timestamp: int | None = None) -> str:
    """A ``Service-Signature`` value for ``body`` (for tests of a receiver)."""
    raw = body.encode() if isinstance(body, str) else body
    t = int(time.time()) if timestamp is None else timestamp
    digest = hmac.new(secret.encode(), f"{t}.".encode() + raw, hashlib.sha256).hexdigest()
    return f"t={t},v1={digest}"


def verify_webhook(
    body: bytes | str,
    signature_header: str | None,
    secret: str,
    tolerance: int = 300,
    *,
    now: float | None = None,
) -> None:
    """Raises :class:`InvalidSignature` unless ``signature_header`` signs ``body`` (the raw
    request body, before any JSON parsing) with ``secret`` within ``tolerance`` seconds."""
    if not signature_header:
        raise InvalidSignature("no Service-Signature header", code="invalid_signature")
    parts: dict[str, list[str]] = {}
    for item in signature_header.split(","):
        name, sep, value = item.strip().partition("=")
        if sep:
            parts.setdefault(name, []).append(value)
    try:
        timestamp = int(parts["t"][0])
    except (KeyError, ValueError):
        raise InvalidSignature(
            "Service-Signature has no t=<unix seconds>", code="invalid_signature"
        ) from None
    current = time.time() if now is None else now
    if abs(current - timestamp) >= tolerance:
        raise InvalidSignature(
            f"Service-Signature is {abs(current - timestamp):.0f} s old (tolerance {tolerance} s)",
            code="stale_signature",
        )
    raw = body.encode() if isinstance(body, str) else body
    expected = hmac.new(secret.encode(), f"{timestamp}.".encode() + raw, hashlib.sha256).hexdigest()
    if not any(hmac.compare_digest(expected, given) for given in parts.get("v1", [])):
        raise InvalidSignature(
            "Service-Signature does not match the body", code="invalid_signature"
        )

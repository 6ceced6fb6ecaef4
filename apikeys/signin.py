"""How django-axes counts and refuses failed sign-ins (``AXES_*`` in config.settings).

Failures are counted per account and per client address on every form that authenticates with
Django's ``authenticate()``: the dashboard's ``/login/`` and the admin's ``/admin/login/``.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render


def username(request: HttpRequest, credentials: dict[str, Any] | None) -> str | None:
    """The account a sign-in names, as stored (lower-case e-mail), whichever form sent it: the
    admin's form does not lower-case it, and ``Owner@X`` must count against ``owner@x``."""
    raw = (credentials or {}).get("username")
    if raw is None:
        raw = request.POST.get("username")
    return raw.strip().lower() if isinstance(raw, str) else None


def client_address(request: HttpRequest) -> str | None:
    """The peer address the server saw (``REMOTE_ADDR``), never a client-sent header such as
    ``X-Forwarded-For``: behind a reverse proxy, daphne's ``--proxy-headers`` sets it from the
    proxy's header, which is the operator's decision, not the client's."""
    return request.META.get("REMOTE_ADDR") or None


def locked_out(
    request: HttpRequest, original_response: Any = None, credentials: Any = None
) -> HttpResponse:
    """The plain-words page of a refused sign-in (429, with ``Retry-After``)."""
    minutes = max(1, round(settings.AXES_COOLOFF_TIME.total_seconds() / 60))
    response = render(
        request,
        "registration/locked_out.html",
        {"minutes": minutes, "limit": settings.AXES_FAILURE_LIMIT},
        status=429,
    )
    response["Retry-After"] = str(minutes * 60)
    return response

"""DRF authentication: bearer API keys, and dashboard sessions for same-origin requests.

Both resolve to a :class:`~apikeys.principal.Principal` in ``request.auth`` by the rules of
``apikeys.gate`` (the raw ASGI endpoints use the same functions). A request that sends an
``Authorization`` header is judged by it alone: a bad key is 401 even with a valid session.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AnonymousUser
from rest_framework.authentication import BaseAuthentication, SessionAuthentication
from rest_framework.request import Request

from apikeys import gate
from apikeys.principal import Principal


class BearerKeyAuthentication(BaseAuthentication):
    """``Authorization: Bearer pgh_…``."""

    def authenticate(self, request: Request) -> tuple[Any, Principal] | None:
        header = request.META.get("HTTP_AUTHORIZATION")
        if header is None:
            return None
        # Counted here (DRF's throttle, KeyRateThrottle, follows for every API view).
        return AnonymousUser(), gate.bearer(header, count=True)

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="pigeonhole"'


class WorkspaceSessionAuthentication(SessionAuthentication):
    """A dashboard session (CSRF enforced on unsafe methods) acting in its current workspace."""

    def authenticate(self, request: Request) -> tuple[Any, Principal] | None:
        result = super().authenticate(request)
        if result is None:
            return None
        return result[0], gate.session_principal(result[0], request.session)

"""Scope permission: each view maps HTTP methods to the scope they need (``view.scopes``)."""

from __future__ import annotations

from typing import Any

from rest_framework.exceptions import NotAuthenticated
from rest_framework.permissions import BasePermission
from rest_framework.request import Request

from apikeys.principal import Principal
from config.api.errors import InsufficientScope


class HasScope(BasePermission):
    """Authenticated, and holding the scope the view names for this method."""

    def has_permission(self, request: Request, view: Any) -> bool:
        principal = request.auth
        if not isinstance(principal, Principal):
            raise NotAuthenticated("A valid API key is required.")
        method = "GET" if request.method == "HEAD" else request.method
        scope = getattr(view, "scopes", {}).get(method)
        if scope is None:
            return True  # the view does not serve this method: DRF answers 405
        if not principal.has(scope):
            raise InsufficientScope(scope)
        return True

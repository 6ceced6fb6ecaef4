"""Scope permission: each view maps HTTP methods to the scope they need (``view.scopes``),
checked by ``apikeys.gate.require_scope`` as on every other way in."""

from __future__ import annotations

from typing import Any

from rest_framework.exceptions import NotAuthenticated
from rest_framework.permissions import BasePermission
from rest_framework.request import Request

from apikeys import gate
from apikeys.principal import Principal


class HasScope(BasePermission):
    """Authenticated, and holding the scope the view names for this method."""

    def has_permission(self, request: Request, view: Any) -> bool:
        principal = request.auth
        if not isinstance(principal, Principal):
            raise NotAuthenticated("A valid API key is required.")
        method = "GET" if request.method == "HEAD" else request.method
        scope = getattr(view, "scopes", {}).get(method)
        # None: the view does not serve this method, and DRF answers 405.
        gate.require_scope(principal, scope)
        return True

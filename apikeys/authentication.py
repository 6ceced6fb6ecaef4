"""DRF authentication: bearer API keys, and dashboard sessions for same-origin requests.

Both resolve to a :class:`~apikeys.principal.Principal` in ``request.auth``. A request that sends
an ``Authorization`` header is judged by it alone: a bad key is 401 even with a valid session.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AnonymousUser
from rest_framework.authentication import BaseAuthentication, SessionAuthentication
from rest_framework.request import Request

from apikeys import selectors, services
from apikeys.exceptions import InvalidKey
from apikeys.models import ROLE_SCOPES
from apikeys.principal import Principal
from config.api.errors import Forbidden, Unauthorized

SESSION_WORKSPACE_KEY = "workspace_id"


def principal_for_key(plain: str) -> Principal:
    """The principal of a plain key (raises ``unauthorized``); shared with the streaming paths."""
    key = selectors.api_key_for_plain(plain)
    services.api_key_touch(key=key)
    return Principal(workspace=key.workspace, scopes=key.effective_scopes, key=key)


def principal_for_session(user: Any, workspace_id: str | None) -> Principal | None:
    """The principal of a signed-in dashboard user in their current workspace."""
    membership = selectors.membership_for(user, workspace_id)
    if membership is None:
        return None
    return Principal(
        workspace=membership.workspace,
        scopes=ROLE_SCOPES[membership.role],
        user=user,
        role=membership.role,
    )


class BearerKeyAuthentication(BaseAuthentication):
    """``Authorization: Bearer pgh_…``."""

    def authenticate(self, request: Request) -> tuple[Any, Principal] | None:
        header = request.META.get("HTTP_AUTHORIZATION")
        if header is None:
            return None
        scheme, _, credential = header.strip().partition(" ")
        if scheme.lower() != "bearer" or not credential.strip():
            raise InvalidKey("Use 'Authorization: Bearer <API key>'.")
        return AnonymousUser(), principal_for_key(credential.strip())

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="pigeonhole"'


class WorkspaceSessionAuthentication(SessionAuthentication):
    """A dashboard session (CSRF enforced on unsafe methods) acting in its current workspace."""

    def authenticate(self, request: Request) -> tuple[Any, Principal] | None:
        result = super().authenticate(request)
        if result is None:
            return None
        user = result[0]
        workspace_id = request.session.get(SESSION_WORKSPACE_KEY)
        principal = principal_for_session(user, workspace_id)
        if principal is None:
            raise Forbidden("Your account is not a member of any workspace.")
        return user, principal


def principal_for_scope(scope: dict[str, Any], *, allow_query_token: bool = False) -> Principal:
    """Authentication for raw ASGI endpoints (wait, stream): the same rules as the REST API.

    A bearer header wins; else ``?access_token=`` where allowed (for EventSource clients that
    cannot set headers); else the dashboard session that Channels' auth middleware resolved.
    """
    from urllib.parse import parse_qsl

    headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
    authorization = headers.get("authorization")
    if authorization is not None:
        scheme, _, credential = authorization.strip().partition(" ")
        if scheme.lower() != "bearer" or not credential.strip():
            raise InvalidKey("Use 'Authorization: Bearer <API key>'.")
        return principal_for_key(credential.strip())
    if allow_query_token:
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        if query.get("access_token"):
            return principal_for_key(query["access_token"])
    user = scope.get("user")
    if user is not None and user.is_authenticated:
        session = scope.get("session")
        workspace_id = session.get(SESSION_WORKSPACE_KEY) if session is not None else None
        principal = principal_for_session(user, workspace_id)
        if principal is None:
            raise Forbidden("Your account is not a member of any workspace.")
        return principal
    raise Unauthorized()

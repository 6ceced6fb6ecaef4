"""The one way in: who a request is, whether it holds the scope it needs, whether it may go on.

Every surface lets requests in through these functions: DRF's authentication, permission and
throttle classes (``apikeys.authentication``, ``apikeys.permissions``, ``apikeys.throttling``)
for the REST API, and :func:`admit` for the raw ASGI endpoints (the long-poll wait, the SSE
stream, the outbox's ``?wait=``, the MCP server). The rules are therefore written once:

- **who**: an ``Authorization`` header is judged alone (``Bearer pgh_…``; anything else is 401,
  even beside a valid session); else ``?access_token=`` where an endpoint allows it (SSE clients
  that cannot set headers); else the dashboard session, acting in its current workspace;
- **scope**: the operation names the scope it needs; a principal without it is 403
  ``insufficient_scope``;
- **rate**: one count per request against ``RATE_LIMIT_PER_MINUTE`` per key (or session user),
  429 ``rate_limited`` with ``Retry-After`` beyond it.

Each function is blocking (database, Redis): async callers run them in a thread (``db_call``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qsl

from apikeys import keycache, selectors, services
from apikeys.exceptions import InvalidKey
from apikeys.models import ROLE_SCOPES
from apikeys.principal import Principal
from apikeys.throttling import COUNTED, throttle
from config.api.errors import Forbidden, InsufficientScope, Unauthorized

SESSION_WORKSPACE_KEY = "workspace_id"


# --- who ------------------------------------------------------------------------------------


def principal_for_key(plain: str, *, count: bool = False) -> Principal:
    """The principal of a plain key (raises ``unauthorized``), its last use recorded; through
    the per-process cache of ``apikeys.keycache``. With ``count`` the request is counted against
    the rate in the same Redis round trip where it can be (``throttle`` then does not count it
    again): a caller that will call ``throttle`` for it anyway."""
    found = keycache.lookup(plain, count=count)
    key, last_used_at = found.key, found.key.last_used_at
    services.api_key_touch(key=key)
    if key.last_used_at != last_used_at:
        keycache.touched(key)
    extra = {COUNTED: found.wait} if found.counted else {}
    return Principal(workspace=key.workspace, scopes=key.effective_scopes, key=key, extra=extra)


def bearer(authorization: str, *, count: bool = False) -> Principal:
    """The principal of an ``Authorization`` header's value: ``Bearer <key>`` or 401."""
    scheme, _, credential = authorization.strip().partition(" ")
    if scheme.lower() != "bearer" or not credential.strip():
        raise InvalidKey("Use 'Authorization: Bearer <API key>'.")
    return principal_for_key(credential.strip(), count=count)


def principal_for_session(user: Any, workspace_id: str | None) -> Principal | None:
    """The principal of a signed-in dashboard user in their current workspace (None: they
    belong to none)."""
    membership = selectors.membership_for(user, workspace_id)
    if membership is None:
        return None
    return Principal(
        workspace=membership.workspace,
        scopes=ROLE_SCOPES[membership.role],
        user=user,
        role=membership.role,
    )


def session_principal(user: Any, session: Mapping[str, Any] | None) -> Principal:
    """:func:`principal_for_session` for a session's current workspace, or 403."""
    workspace_id = session.get(SESSION_WORKSPACE_KEY) if session is not None else None
    principal = principal_for_session(user, workspace_id)
    if principal is None:
        raise Forbidden("Your account is not a member of any workspace.")
    return principal


def principal_of(
    headers: Mapping[str, str],
    *,
    query_token: str | None = None,
    user: Any = None,
    session: Mapping[str, Any] | None = None,
) -> Principal:
    """Who a request is, by the rules of the module docstring (``headers`` lower-cased)."""
    authorization = headers.get("authorization")
    if authorization is not None:
        return bearer(authorization)
    if query_token:
        return principal_for_key(query_token)
    if user is not None and user.is_authenticated:
        return session_principal(user, session)
    raise Unauthorized()


# --- scope (the rate: apikeys.throttling.throttle) ----------------------------------------------


def require_scope(principal: Principal, scope: str | None) -> None:
    """403 ``insufficient_scope`` unless ``principal`` holds ``scope`` (None: none needed)."""
    if scope is not None and not principal.has(scope):
        raise InsufficientScope(scope)


# --- raw ASGI endpoints -----------------------------------------------------------------------


def admit(
    scope: Mapping[str, Any],
    *,
    needs: str | None,
    allow_query_token: bool = False,
    count: bool = True,
) -> Principal:
    """Lets an ASGI request in as the REST API would: who (a session as resolved by Channels'
    ``AuthMiddlewareStack`` in ``scope``), the scope ``needs``, and one request against the
    rate unless ``count`` is false (a wrapper whose Django view counts the request itself)."""
    headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
    query_token = None
    if allow_query_token:
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        query_token = query.get("access_token") or None
    principal = principal_of(
        headers, query_token=query_token, user=scope.get("user"), session=scope.get("session")
    )
    require_scope(principal, needs)
    if count:
        throttle(principal)
    return principal

"""Who calls a tool: the bearer API key, with its scopes and rate limit, exactly as on REST.

:func:`authenticate` is the one place the MCP server resolves a credential. Over HTTP it runs
once per request (every JSON-RPC POST to ``/mcp``, as every REST request counts once against
``RATE_LIMIT_PER_MINUTE``); over stdio, where there are no requests, once per tool call. It uses
the functions the raw ASGI endpoints use (``apikeys.authentication.principal_for_scope``,
``apikeys.throttling.hit``), so a revoked, expired or unknown key, and a key over its limit, are
refused here as there. Dashboard sessions are not accepted: ``/mcp`` is not behind Channels'
session middleware, so a browser's cookies cannot call tools (no CSRF surface).
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any

from django.conf import settings

from apikeys.authentication import principal_for_scope
from apikeys.principal import Principal
from apikeys.throttling import hit
from config.api.asgi import db_call
from config.api.errors import InsufficientScope, RateLimited

# Set by ``manage.py mcp``: the scope that stands for the stdio client's one connection.
STDIO_SCOPE: ContextVar[dict[str, Any] | None] = ContextVar("pigeonhole_mcp_stdio", default=None)
PRINCIPAL = "pigeonhole.principal"  # where the HTTP app leaves the request's principal


def bearer_scope(key: str) -> dict[str, Any]:
    """An ASGI-like scope carrying ``key`` as its bearer credential (stdio)."""
    return {"type": "mcp-stdio", "headers": [(b"authorization", f"Bearer {key}".encode())]}


@db_call
def authenticate(scope: dict[str, Any]) -> Principal:
    """The principal of the request's bearer key, after its rate limit: ``unauthorized`` (401)
    or ``rate_limited`` (429, with the seconds to wait) otherwise."""
    principal = principal_for_scope(scope)
    wait = hit(principal.rate_limit_id, settings.RATE_LIMIT_PER_MINUTE)
    if wait is not None:
        seconds = max(1, int(wait))
        raise RateLimited(
            f"Too many requests; retry in {seconds} s.", headers={"Retry-After": str(seconds)}
        )
    return principal


def require(principal: Principal, scope: str) -> None:
    """The key must carry ``scope`` (``read``, ``write``, ``send``), as the REST endpoint asks."""
    if not principal.has(scope):
        raise InsufficientScope(scope)

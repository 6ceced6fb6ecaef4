"""Who calls a tool: the bearer API key, with its scopes and rate limit, exactly as on REST.

:func:`authenticate` is the one place the MCP server resolves a credential. Over HTTP it runs
once per request (every JSON-RPC POST to ``/mcp``, as every REST request counts once against
``RATE_LIMIT_PER_MINUTE``); over stdio, where there are no requests, once per tool call. It uses
``apikeys.gate``, the one way in of the REST API and the raw ASGI endpoints, so a revoked,
expired or unknown key, a key without the scope and a key over its limit are refused here as
there. Dashboard sessions are not accepted: ``/mcp`` is not behind Channels'
session middleware, so a browser's cookies cannot call tools (no CSRF surface).
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any

from apikeys import gate
from apikeys.principal import Principal
from config.api.asgi import db_call

# Set by ``manage.py mcp``: the scope that stands for the stdio client's one connection.
STDIO_SCOPE: ContextVar[dict[str, Any] | None] = ContextVar("pigeonhole_mcp_stdio", default=None)
PRINCIPAL = "pigeonhole.principal"  # where the HTTP app leaves the request's principal


def bearer_scope(key: str) -> dict[str, Any]:
    """An ASGI-like scope carrying ``key`` as its bearer credential (stdio)."""
    return {"type": "mcp-stdio", "headers": [(b"authorization", f"Bearer {key}".encode())]}


@db_call
def authenticate(scope: dict[str, Any]) -> Principal:
    """The principal of the request's bearer key, counted against its rate limit:
    ``unauthorized`` (401) or ``rate_limited`` (429, with ``Retry-After``) otherwise."""
    return gate.admit(scope, needs=None)


def require(principal: Principal, scope: str) -> None:
    """The key must carry ``scope`` (``read``, ``write``, ``send``), as the REST endpoint asks."""
    gate.require_scope(principal, scope)

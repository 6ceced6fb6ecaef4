"""``/mcp``: the MCP server over streamable HTTP, a raw ASGI app mounted by ``config.asgi``.

Every request is authenticated here first (``outbox.mcp.auth.authenticate``: the bearer key and
its rate limit); a missing or bad key is a plain HTTP 401 in the API's error envelope, before the
SDK sees the request, and the principal rides in the request's scope to the tools.

The SDK's session manager runs in *stateless* mode: each POST is a whole exchange and no session
lives in this process, so a client that reconnects to another web process loses nothing (the
deployment runs several). Its responses are Server-Sent Events, which lets a parked
``wait_for_email`` send progress notifications before its result. daphne speaks no ASGI lifespan,
so the manager's task group is started by the first request and lives as long as the process.

The SDK's DNS-rebinding check is off: it protects servers that trust whoever can reach them
(a local server, a cookie), and ``/mcp`` trusts nothing but a bearer key a web page cannot read.
"""

from __future__ import annotations

import asyncio
from typing import Any

from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings

from config.api.asgi import Receive, Send, send_error
from config.api.errors import to_api_error
from outbox.mcp.auth import PRINCIPAL, authenticate
from outbox.mcp.server import server

server.streamable_http_app(
    stateless_http=True,
    transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
)
manager: StreamableHTTPSessionManager = server.session_manager
_started: asyncio.Event | None = None
_runner: asyncio.Task | None = None


async def _run_forever(started: asyncio.Event) -> None:
    async with manager.run():
        started.set()
        await asyncio.Event().wait()  # until the process ends


async def _ensure_started() -> None:
    global _started, _runner
    if _started is None:
        _started = asyncio.Event()
        _runner = asyncio.get_running_loop().create_task(_run_forever(_started))
    await _started.wait()


async def mcp_app(scope: dict[str, Any], receive: Receive, send: Send) -> None:
    """POST /mcp (JSON-RPC), with ``Authorization: Bearer pgh_…``."""
    try:
        principal = await authenticate(scope)
    except Exception as exc:
        error = to_api_error(exc)
        if error is None:
            raise
        await send_error(send, error)
        return
    await _ensure_started()
    await manager.handle_request({**scope, PRINCIPAL: principal}, receive, send)


__all__ = ["mcp_app"]

"""``/mcp``: the MCP server over streamable HTTP, a raw ASGI app mounted by ``config.asgi``.

Every request is authenticated here first (``outbox.mcp.auth.authenticate``: the bearer key and
its rate limit); a missing or bad key is a plain HTTP 401 in the API's error envelope, before the
SDK sees the request, and the principal rides in the request's scope to the tools.

The SDK's session manager runs in *stateless* mode: each POST is a whole exchange and no session
lives in this process, so a client that reconnects to another web process loses nothing (the
deployment runs several). Its responses are Server-Sent Events, which lets a parked
``wait_for_email`` send progress notifications before its result. daphne speaks no ASGI lifespan,
so the manager's task group is started by the first request and lives as long as the process.

A request that asked for no progress (no ``progressToken`` in its ``_meta``) is answered with
plain JSON instead (the protocol lets the server choose, and the client accepts both): such a call
can receive nothing but its result here (the tools send no log messages, and a stateless server
sends no requests to the client), and the SSE response cost a wait's every result a second
exchange's worth of work: an event-stream response with its ping, disconnect and shutdown tasks,
and, because the SDK's client closes an event stream as soon as the result arrives, before the
stream's end was read, a new TCP connection for the next call (a JSON body is read to its end and
the connection is kept). A call with a progress token keeps the event stream and its progress
notifications. Either way the connection is watched here (:func:`_exchange`), so a client that
leaves ends its wait and frees its slot at once.

The SDK's DNS-rebinding check is off: it protects servers that trust whoever can reach them
(a local server, a cookie), and ``/mcp`` trusts nothing but a bearer key a web page cannot read.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import anyio
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings

from config.api.asgi import Receive, Send, send_error
from config.api.errors import to_api_error
from outbox.mcp.auth import PRINCIPAL, authenticate
from outbox.mcp.server import server

SECURITY = TransportSecuritySettings(enable_dns_rebinding_protection=False)
server.streamable_http_app(stateless_http=True, transport_security=SECURITY)
manager: StreamableHTTPSessionManager = server.session_manager  # event-stream answers
json_manager = StreamableHTTPSessionManager(  # the same server, JSON answers
    app=manager.app,
    json_response=True,
    stateless=True,
    security_settings=SECURITY,
    max_request_body_size=manager.max_request_body_size,
)
_started: asyncio.Event | None = None
_runner: asyncio.Task | None = None


async def _run_forever(started: asyncio.Event) -> None:
    async with manager.run(), json_manager.run():
        started.set()
        await asyncio.Event().wait()  # until the process ends


async def _ensure_started() -> None:
    global _started, _runner
    if _started is None:
        _started = asyncio.Event()
        _runner = asyncio.get_running_loop().create_task(_run_forever(_started))
    await _started.wait()


async def _read_body(receive: Receive, limit: int) -> tuple[list[dict[str, Any]], bytes | None]:
    """The request's body messages as received, and the body, or None past ``limit`` bytes
    (the SDK then reads the rest and refuses it as too large)."""
    messages: list[dict[str, Any]] = []
    size = 0
    while True:
        message = await receive()
        messages.append(message)
        if message["type"] != "http.request":
            return messages, None
        size += len(message.get("body", b""))
        if size > limit:
            return messages, None
        if not message.get("more_body", False):
            return messages, b"".join(m.get("body", b"") for m in messages)


def wants_json(body: bytes | None) -> bool:
    """A single JSON-RPC request without a progress token: nothing to stream but its answer.
    Anything else (a notification, a batch, a body the SDK must refuse) takes the SDK's
    default path."""
    if not body:
        return False
    try:
        message = json.loads(body)
    except ValueError:
        return False
    if not isinstance(message, dict) or "method" not in message or "id" not in message:
        return False
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    return not (isinstance(meta, dict) and "progressToken" in meta)


async def _exchange(
    handler: StreamableHTTPSessionManager,
    scope: dict[str, Any],
    body: list[dict[str, Any]],
    receive: Receive,
    send: Send,
) -> None:
    """The SDK's answer to the request (JSON or an event stream, by ``handler``), cancelled when
    the client disconnects first, so the tool's wait ends and gives its slot back. The SDK reads
    the connection after the body only to notice a disconnect, and on the event-stream path
    noticing it ended the response but not the tool's wait (which kept its slot until its
    timeout); here one watcher reads the connection and tells the SDK when it has gone."""
    pending = list(body)
    gone = anyio.Event()

    async def replay() -> dict[str, Any]:
        if pending:
            return pending.pop(0)
        await gone.wait()  # only the watcher below reads the connection after the body
        return {"type": "http.disconnect"}

    async with anyio.create_task_group() as group:

        async def watch() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            gone.set()
            group.cancel_scope.cancel()

        group.start_soon(watch)
        await handler.handle_request(scope, replay, send)
        group.cancel_scope.cancel()


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
    scope = {**scope, PRINCIPAL: principal}
    if scope.get("method") != "POST":
        await manager.handle_request(scope, receive, send)
        return
    messages, body = await _read_body(receive, manager.max_request_body_size)
    if body is None:  # past the size limit: the SDK reads the rest and refuses it
        pending = list(messages)

        async def replay() -> dict[str, Any]:
            return pending.pop(0) if pending else await receive()

        await manager.handle_request(scope, replay, send)
        return
    await _exchange(json_manager if wants_json(body) else manager, scope, messages, receive, send)


__all__ = ["mcp_app"]

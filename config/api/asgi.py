"""Small helpers for raw ASGI endpoints (long-poll, SSE) that speak the API's conventions."""

from __future__ import annotations

import json
import os
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import parse_qsl

from config.api.errors import ApiError, envelope

Send = Callable[[dict[str, Any]], Awaitable[None]]
Receive = Callable[[], Awaitable[dict[str, Any]]]

SECURITY_HEADERS = [
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
    (b"x-frame-options", b"DENY"),
]


def header(scope: dict[str, Any], name: str) -> str | None:
    wanted = name.lower().encode()
    for key, value in scope.get("headers", []):
        if key.lower() == wanted:
            return value.decode("latin-1")
    return None


def query_pairs(scope: dict[str, Any]) -> list[tuple[str, str]]:
    """The query string as ``(name, value)`` pairs in order (percent-decoded as UTF-8)."""
    return parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)


def query_params(scope: dict[str, Any]) -> dict[str, str]:
    """The query string as a dict (the last value of a repeated name wins)."""
    return dict(query_pairs(scope))


async def send_json(
    send: Send, status: int, body: Any, headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    payload = json.dumps(body, separators=(",", ":")).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(payload)).encode()),
                (b"cache-control", b"no-store"),
                *SECURITY_HEADERS,
                *(headers or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": payload})


async def send_error(send: Send, error: ApiError) -> None:
    extra = [(k.lower().encode(), v.encode()) for k, v in error.headers.items()]
    if error.status == 401:
        extra.append((b"www-authenticate", b'Bearer realm="pigeonhole"'))
    await send_json(send, error.status, envelope(error.code, error.message, error.issues), extra)


async def send_empty(send: Send, status: int) -> None:
    await send({"type": "http.response.start", "status": status, "headers": SECURITY_HEADERS})
    await send({"type": "http.response.body", "body": b""})


async def wait_for_disconnect(receive: Receive) -> None:
    """Returns when the client goes away (the request body, if any, is drained first)."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return


# The threads of db_call: its own pool, never the event loop's default executor. Django runs
# work of its own there (the log line of every answer >= 400 among it) while the request that
# answers holds a database connection; with db_call's threads all waiting for a connection in
# that same executor, a flood of 4xx answers beside open waits or streams stood the whole process
# still until DB_POOL_TIMEOUT.
DB_CALL_THREADS = min(32, (os.cpu_count() or 1) + 4)
_db_call_executor = ThreadPoolExecutor(max_workers=DB_CALL_THREADS, thread_name_prefix="db_call")


def db_call(fn: Callable[..., Any]) -> Callable[..., Awaitable[Any]]:
    """Runs ``fn`` (database work) in db_call's thread pool, in parallel with other requests'
    calls.

    Channels' ``database_sync_to_async`` funnels every call through one shared thread; under a
    thousand parked waiters that thread becomes the bottleneck. Each call leaves its thread's
    connection healthy or closed (see :func:`config.db.release_connections`).
    """
    from asgiref.sync import sync_to_async

    from config.db import release_connections

    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        finally:
            release_connections()

    return sync_to_async(run, thread_sensitive=False, executor=_db_call_executor)

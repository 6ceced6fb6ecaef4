"""Django's request cycle for the REST API in one thread hop: ``/api/`` paths that no raw ASGI
app takes (config.asgi) run the whole sync stack — middleware, DRF view, rendering — in a thread
of a fixed pool, as a threaded WSGI server would run it.

Django's own ASGI handler runs the middleware chain in async mode: each request gets a thread of
its own (asgiref's ``ThreadSensitiveContext``: a new single-thread executor, started and joined
per request), and every sync middleware hook and the sync view are a hop between the event loop
and that thread, a dozen per request. Measured under 50 keep-alive clients (issue 32) that was
most of a request's CPU beside the view itself. The views are the same; Django chains the
middleware in sync mode (``load_middleware(is_async=False)``).

What the API answers is the same: the same request class, signals
(``request_started`` before, ``request_finished`` through ``response.close()`` after, which
hands the database connection back to the pool) and middleware, less those that serve pages
only (``settings.PAGE_ONLY_MIDDLEWARE``: no static files, flash messages, dashboard CSP or sign-in
lockout page under /api/; about 4 % of a ``GET /emails/{id}``'s CPU, and
tests/test_api_handler.py compares the answers). The body is read on the event loop first, as
Django does. A client that leaves mid-request does not cancel the view (no sync view could be
cancelled anyway); its answer is dropped. Streaming responses are sent as Django sends them,
then closed in the pool.

``API_THREADS`` (default 4) bounds the requests one process serves at once; each holds one
database connection of the pool (``DB_POOL_MAX``, default 10) while it runs.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from django.conf import settings
from django.core import signals
from django.core.exceptions import RequestAborted
from django.core.handlers.asgi import ASGIHandler, get_script_prefix
from django.core.handlers.base import BaseHandler
from django.http import HttpResponseBase
from django.urls import set_script_prefix


def api_middleware() -> list[str]:
    """The API's chain: ``settings.MIDDLEWARE`` less ``settings.PAGE_ONLY_MIDDLEWARE``."""
    return [name for name in settings.MIDDLEWARE if name not in settings.PAGE_ONLY_MIDDLEWARE]


class ApiHandler(ASGIHandler):
    """An ASGI app serving Django's sync request cycle from a fixed thread pool."""

    def __init__(self, threads: int | None = None) -> None:
        BaseHandler.__init__(self)
        self.load_middleware(is_async=False)
        self.pool = ThreadPoolExecutor(
            max_workers=threads or settings.API_THREADS, thread_name_prefix="api"
        )

    def load_middleware(self, is_async: bool = False) -> None:
        """Django's, over ``MIDDLEWARE`` less ``PAGE_ONLY_MIDDLEWARE``: Django reads
        ``MIDDLEWARE`` there and nowhere else, so it is that list for the duration of the call."""
        full = settings.MIDDLEWARE
        settings.MIDDLEWARE = api_middleware()
        try:
            super().load_middleware(is_async)
        finally:
            settings.MIDDLEWARE = full

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            raise ValueError(f"ApiHandler serves HTTP only, not {scope['type']}.")
        try:
            body_file = await self.read_body(receive)
        except RequestAborted:
            return
        loop = asyncio.get_running_loop()
        try:
            response = await loop.run_in_executor(self.pool, self.respond, scope, body_file)
            if response.streaming:
                try:
                    await self.send_response(response, send)
                finally:
                    await loop.run_in_executor(self.pool, response.close)
            else:
                await self.send_response(response, send)
        finally:
            body_file.close()

    def respond(self, scope: dict[str, Any], body_file: Any) -> HttpResponseBase:
        """The request cycle in a pool thread; a response that is not streamed is closed here
        (``request_finished``: the connection goes back to the pool before the send)."""
        set_script_prefix(get_script_prefix(scope))
        signals.request_started.send(sender=self.__class__, scope=scope)
        request, response = self.create_request(scope, body_file)
        if request is not None:
            response = self.get_response(request)
            response._handler_class = self.__class__
        if not response.streaming:
            response.close()
        return response

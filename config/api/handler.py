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

**An API thread keeps its connection from one request to the next while requests queue**
(PostgreSQL with the pool, while ``API_THREADS`` leaves at least two of ``DB_POOL_MAX`` to the
rest of the process): when a request ends and others wait for a thread, the connection it
checked out stays with its thread, which takes the next one, instead of going back to the pool
at ``request_finished`` and out again at the next request's first statement. When no request
waits, it goes back as before, so an idle API holds no connection and waits, streams and the
dashboard have the whole pool. A connection is kept at most ``API_CONNECTION_SECONDS`` (300)
from its checkout, then goes back at the next request's start or end. Django's checks still
run at every request's start and end (``close_if_unusable_or_obsolete``): a connection whose
Django-managed transaction was left open, or broken by an error, goes back at once. Under 50
clients that checkout and return was about a twentieth of a ``GET /emails/{id}``'s CPU and more
of a ``POST /inboxes``'s (A/B in the commits that made it).
:meth:`ApiHandler.release_connections` gives back whatever the threads still hold (the test
suite calls it before it drops its database).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Any

from django.conf import settings
from django.core import signals
from django.core.exceptions import RequestAborted
from django.core.handlers.asgi import ASGIHandler, get_script_prefix
from django.core.handlers.base import BaseHandler
from django.db import DEFAULT_DB_ALIAS, connections
from django.http import HttpResponseBase
from django.urls import set_script_prefix

# Every handler made in this process (one in a web process; a test makes its own): held, not
# weakly, so that a handler a test let go of still has its threads' connections given back.
_handlers: list[ApiHandler] = []
logger = logging.getLogger(__name__)
_kept = threading.local()  # per API thread: ``until``, the close_at it gave its connection


def api_middleware() -> list[str]:
    """The API's chain: ``settings.MIDDLEWARE`` less ``settings.PAGE_ONLY_MIDDLEWARE``."""
    return [name for name in settings.MIDDLEWARE if name not in settings.PAGE_ONLY_MIDDLEWARE]


class ApiHandler(ASGIHandler):
    """An ASGI app serving Django's sync request cycle from a fixed thread pool."""

    def __init__(self, threads: int | None = None) -> None:
        BaseHandler.__init__(self)
        self.load_middleware(is_async=False)
        self.pool = ApiThreads(threads or settings.API_THREADS)
        self.keep_seconds = keep_seconds(self.pool.threads)
        _handlers.append(self)

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
        if self.keep_seconds:
            keep_connection(self.keep_seconds, busy=self.pool.waiting() > 0)
        if not response.streaming:
            response.close()
        return response

    def release_connections(self) -> None:
        """Gives back the connection each of the pool's threads keeps (module doc)."""
        self.pool.release_connections()

    def close(self) -> None:
        """Gives back the threads' connections and ends the threads."""
        self.pool.shutdown()
        if self in _handlers:
            _handlers.remove(self)


class ApiThreads(ThreadPoolExecutor):
    """The API's threads. Each may keep its connection from one request to the next (module
    doc), so they are given back before the threads end: a thread that ended holding one left it
    open (the test database's ``DROP`` at the end of a run found it)."""

    def __init__(self, threads: int) -> None:
        super().__init__(max_workers=threads, thread_name_prefix="api")
        self.threads = threads

    def release_connections(self) -> None:
        """One task per thread, each held at a barrier until every thread has one, closes the
        thread's connection (back to the pool); nothing once the pool is shut down."""
        barrier = threading.Barrier(self.threads)

        def release() -> None:
            try:
                barrier.wait(timeout=30)
            finally:  # a broken barrier (a thread busy past it): this one's goes back anyway
                connections[DEFAULT_DB_ALIAS].close()

        try:
            tasks = [self.submit(release) for _ in range(self.threads)]
        except RuntimeError:  # shut down already: its threads gave theirs back then
            return
        done, pending = wait(tasks, timeout=60)
        failed = [t for t in done if t.exception() is not None]
        if pending or failed:
            logger.warning(
                "API threads: %d of %d did not give their connection back (%s)",
                len(pending) + len(failed),
                self.threads,
                failed[0].exception() if failed else "still busy",
            )

    def waiting(self) -> int:
        """Requests queued for a thread (ThreadPoolExecutor's work queue)."""
        return self._work_queue.qsize()

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self.release_connections()
        super().shutdown(wait=wait, cancel_futures=cancel_futures)


def keep_seconds(threads: int) -> float:
    """How long an API thread keeps a connection it checked out (0: it gives it back after
    each request, as every other thread does): ``API_CONNECTION_SECONDS`` on PostgreSQL with the
    pool, if ``threads`` leaves at least two of its connections to the rest of the process."""
    database = settings.DATABASES[DEFAULT_DB_ALIAS]
    pool = database.get("OPTIONS", {}).get("pool")
    if "postgresql" not in database["ENGINE"] or not isinstance(pool, dict):
        return 0.0
    if threads > pool.get("max_size", 0) - 2:
        return 0.0
    return max(0.0, settings.API_CONNECTION_SECONDS)


def keep_connection(seconds: float, *, busy: bool) -> None:
    """In an API thread, after the request's work and before ``request_finished``: while
    requests queue (``busy``), a connection checked out during this request (Django set its
    ``close_at`` to the moment it connected, ``CONN_MAX_AGE`` being 0 with the pool) is kept for
    up to ``seconds``, and the one kept already stays until then; otherwise the connection goes
    back at ``request_finished``."""
    database = connections[DEFAULT_DB_ALIAS]
    if database.connection is None or database.close_at is None:
        return
    if not busy:
        database.close_at = time.monotonic()  # back to the pool at request_finished
    elif database.close_at != getattr(_kept, "until", None):
        _kept.until = database.close_at = time.monotonic() + seconds


def release_all_connections() -> None:
    """:meth:`ApiHandler.release_connections` of every handler of this process."""
    for handler in list(_handlers):
        handler.release_connections()

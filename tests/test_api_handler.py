"""The REST API's own request cycle (``config.api.handler.ApiHandler``, the middleware of
``settings.MIDDLEWARE`` less ``PAGE_ONLY_MIDDLEWARE``) answers as Django's ASGI handler with the whole ``MIDDLEWARE``
chain does: the same status, headers and body for bearer keys and dashboard sessions, reads and
writes, errors, the refusals of CSRF and of a method, a trailing slash and the HTML of /api/docs.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.conf import settings
from django.core.asgi import get_asgi_application
from django.db import connection, connections
from django.test.utils import override_settings
from rest_framework.test import APIClient

from apikeys import services as key_services
from apikeys.audit import Actor
from config.api.handler import ApiHandler, api_middleware, keep_connection, keep_seconds
from inboxes import services as inbox_services
from mail import pipeline
from tests.factories import MembershipFactory
from tests.mail.messages import message

pytestmark = pytest.mark.django_db(transaction=True)  # both handlers answer from other threads

Answer = tuple[int, list[tuple[bytes, bytes]], bytes]


async def _call(
    app: Any, method: str, path: str, headers: list[tuple[bytes, bytes]], body: bytes = b""
) -> Answer:
    path, _, query = path.partition("?")
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": query.encode(),
        "root_path": "",
        "headers": [
            (b"host", b"testserver"),
            *headers,
            *([(b"content-length", str(len(body)).encode())] if body else []),
        ],
        "client": ("127.0.0.1", 50000),
        "server": ("testserver", 80),
    }
    sent: list[dict[str, Any]] = []
    incoming = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive() -> dict[str, Any]:
        if incoming:
            return incoming.pop()
        await asyncio.Event().wait()  # the client stays until the answer is sent
        return {"type": "http.disconnect"}

    async def send(event: dict[str, Any]) -> None:
        sent.append(event)

    await asyncio.wait_for(app(scope, receive, send), 30)
    start = sent[0]
    return start["status"], sorted(start["headers"]), b"".join(e.get("body", b"") for e in sent[1:])


def _chain(handler: ApiHandler) -> list[str]:
    chain, names = handler._middleware_chain, []
    while hasattr(chain, "get_response") or hasattr(chain, "__wrapped__"):
        inner = getattr(chain, "__wrapped__", None) or chain
        if hasattr(inner, "get_response"):
            names.append(f"{type(inner).__module__}.{type(inner).__name__}")
            chain = inner.get_response
        else:
            break
    return names


def test_the_api_chain_leaves_out_only_page_middleware() -> None:
    full = list(settings.MIDDLEWARE)
    handler = ApiHandler(threads=1)
    expected = [name for name in full if name not in settings.PAGE_ONLY_MIDDLEWARE]
    assert api_middleware() == expected
    assert set(settings.PAGE_ONLY_MIDDLEWARE) < set(full)
    assert _chain(handler) == expected
    assert full == settings.MIDDLEWARE  # put back after loading
    handler.pool.shutdown()


def test_the_api_chain_follows_a_changed_middleware_list() -> None:
    extra = "django.middleware.gzip.GZipMiddleware"
    with override_settings(MIDDLEWARE=[*settings.MIDDLEWARE, extra]):
        handler = ApiHandler(threads=1)
        assert _chain(handler)[-1] == extra
        assert "django.contrib.messages.middleware.MessageMiddleware" not in _chain(handler)
    handler.pool.shutdown()


def test_answers_are_those_of_the_whole_chain(workspace) -> None:  # type: ignore[no-untyped-def]
    ours, django = ApiHandler(threads=2), get_asgi_application()
    key = key_services.api_key_create(
        workspace=workspace, name="k", scopes=["admin"], by=Actor.system("tests")
    ).plain
    inbox = inbox_services.inbox_create(workspace=workspace, local_part="box")
    delivery = pipeline.receive_one(message(to=inbox.address, subject="Hi"), to=inbox.address)
    bearer = [(b"authorization", f"Bearer {key}".encode())]
    owner = MembershipFactory(workspace=workspace, role="owner")
    browser = APIClient()
    browser.force_login(owner.user)
    cookie = [(b"cookie", f"sessionid={browser.cookies['sessionid'].value}".encode())]
    json_body = [(b"content-type", b"application/json")]
    cases = [
        ("GET", f"/api/v1/emails/{delivery.email_id}", bearer, b""),
        ("GET", f"/api/v1/emails/{delivery.email_id}?mark_read=false", bearer, b""),
        ("GET", "/api/v1/emails/em_nothing_here", bearer, b""),
        ("GET", "/api/v1/inboxes?limit=5", bearer, b""),
        ("GET", "/api/v1/inboxes?limit=nope", bearer, b""),
        ("GET", "/api/v1/inboxes/", bearer, b""),
        ("GET", "/api/v1/inboxes", [], b""),
        ("GET", "/api/v1/inboxes", [(b"authorization", b"Bearer pgh_nope")], b""),
        ("GET", "/api/v1/inboxes", [*bearer, (b"accept", b"text/html")], b""),
        ("GET", "/api/v1/me", cookie, b""),
        ("POST", "/api/v1/inboxes", [*cookie, *json_body], b"{}"),  # CSRF refuses it
        ("PUT", "/api/v1/inboxes", [*bearer, *json_body], b"{}"),
        ("POST", "/api/v1/inboxes", [*bearer, *json_body], b"{not json"),
        ("HEAD", "/api/v1/me", bearer, b""),
        ("OPTIONS", "/api/v1/me", bearer, b""),
        ("GET", "/api/docs", [], b""),
        ("GET", "/api/nowhere", [], b""),
    ]
    for method, path, headers, body in cases:
        mine = async_to_sync(_call)(ours, method, path, headers, body)
        theirs = async_to_sync(_call)(django, method, path, headers, body)
        assert mine == theirs, (method, path)
    # A write: the same answer but for the new inbox's own id and times.
    created = [
        async_to_sync(_call)(app, "POST", "/api/v1/inboxes", [*bearer, *json_body], b"{}")
        for app in (ours, django)
    ]
    (status_a, headers_a, body_a), (status_b, headers_b, body_b) = created
    assert status_a == status_b == 200
    assert [name for name, _ in headers_a] == [name for name, _ in headers_b]
    assert json.loads(body_a).keys() == json.loads(body_b).keys()
    ours.close()


def _checkouts() -> int:
    """Connections handed out by this process's pool so far (psycopg_pool's counter)."""
    return int(connection.pool.get_stats().get("requests_num", 0))


def test_an_api_thread_keeps_its_connection_while_requests_queue(workspace) -> None:  # type: ignore[no-untyped-def]
    """On PostgreSQL with the pool, a burst of requests queued for one API thread is served on
    one connection checked out once; a request with none waiting behind it gives its connection
    back, so an idle API holds none. Elsewhere (SQLite) nothing is kept."""
    handler = ApiHandler(threads=1)
    key = key_services.api_key_create(
        workspace=workspace, name="k", scopes=["read"], by=Actor.system("tests")
    ).plain
    bearer = [(b"authorization", f"Bearer {key}".encode())]

    async def burst(count: int) -> None:
        answers = await asyncio.gather(
            *[_call(handler, "GET", "/api/v1/inboxes", bearer) for _ in range(count)]
        )
        assert [status for status, _, _ in answers] == [200] * count

    try:
        if connection.vendor != "postgresql" or not isinstance(
            settings.DATABASES["default"].get("OPTIONS", {}).get("pool"), dict
        ):
            assert handler.keep_seconds == 0
            return
        assert handler.keep_seconds == settings.API_CONNECTION_SECONDS > 0
        before = _checkouts()
        async_to_sync(burst)(20)  # 19 wait behind the first
        assert _checkouts() - before <= 2  # one, and one more if the burst arrived in two parts
        assert handler.pool.waiting() == 0
        before = _checkouts()
        for _ in range(3):  # one at a time: nobody waits, each gives its connection back
            async_to_sync(burst)(1)
        assert _checkouts() - before == 3
        handler.keep_seconds = 0  # off (API_CONNECTION_SECONDS=0): one checkout per request
        before = _checkouts()
        async_to_sync(burst)(10)
        assert _checkouts() - before == 10
    finally:
        handler.close()


def test_a_kept_connection_goes_back_when_its_time_is_up_or_nobody_waits() -> None:
    """``keep_connection`` on a real connection of a thread of its own: kept while busy for its
    time from its checkout (not extended by later requests), then closed by Django's check at a
    request's end; handed back at once when nobody waits."""
    if connection.vendor != "postgresql":
        return  # (keep_seconds is 0 there: tested above)
    seen: dict[str, Any] = {}

    def run() -> None:
        database = connections["default"]
        try:
            database.ensure_connection()
            keep_connection(0.3, busy=True)
            first = database.close_at
            seen["kept"] = first - time.monotonic()
            keep_connection(0.3, busy=True)  # a later request: the same deadline
            seen["same"] = database.close_at == first
            database.close_if_unusable_or_obsolete()
            seen["open before"] = database.connection is not None
            time.sleep(0.35)
            database.close_if_unusable_or_obsolete()  # request_finished after the deadline
            seen["closed after"] = database.connection is None
            database.ensure_connection()
            keep_connection(0.3, busy=False)  # nobody waits
            database.close_if_unusable_or_obsolete()
            seen["closed when idle"] = database.connection is None
        finally:
            database.close()

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(30)
    assert 0.2 < seen["kept"] <= 0.3 and seen["same"] and seen["open before"]
    assert seen["closed after"] and seen["closed when idle"]


def test_a_pool_too_small_for_the_threads_keeps_nothing() -> None:
    pool = settings.DATABASES["default"].get("OPTIONS", {}).get("pool")
    if not isinstance(pool, dict):
        assert keep_seconds(1) == 0  # no pool (SQLite, or DB_POOL_MAX=0): nothing kept
        return
    assert keep_seconds(pool["max_size"] - 2) == settings.API_CONNECTION_SECONDS
    assert keep_seconds(pool["max_size"] - 1) == 0  # the rest of the process needs two
    with override_settings(API_CONNECTION_SECONDS=0):
        assert keep_seconds(1) == 0

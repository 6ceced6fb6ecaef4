"""``wait`` for outbox decisions without a thread: an ASGI wrapper in front of the Django views
of ``POST /inboxes/{id}/send`` and ``GET /outbox/{id}``.

The view answers first (auth, checks, the item), naming a pending item in the request's ASGI
scope with :func:`mark_pending`; if it did and ``wait`` asks for it, the wrapper listens on the
item's group through ``events.listen`` (and re-reads the row every 2 s) until its status
changes or time is up. The credential is read once, by ``apikeys.gate`` as on every way in; a
wait made with an API key ends with 401 once the key is revoked or expires (``apikeys.watch``).
Such a wait holds one of its key's (or session's) ``MAX_OPEN_STREAMS_PER_KEY`` slots, taken
before the view runs: at the cap the request answers 429 and nothing is sent or read, rather
than doing the work and then refusing to wait."""

from __future__ import annotations

import asyncio
from typing import Any

from apikeys import gate
from apikeys.principal import Principal
from apikeys.throttling import Lease, aclose_slot, open_slot, settled
from apikeys.watch import key_watch
from config.api.asgi import Receive, Send, db_call, query_params, send_error, send_json
from config.api.errors import ApiError
from events.listen import CLOSED, TIMEOUT, listen
from outbox.models import OutboxItem, Status
from outbox.serializers import OutboxOut
from outbox.services import outbound_record, outbox_group

POLL_SECONDS = 2.0
# The ASGI scope key under which the view names the pending item it answered with (the Django
# request's ``scope`` is the wrapper's): the wrapper learns what to wait for without reading
# the response it holds back.
PENDING_ITEM = "pigeonhole.outbox.pending_item"


def mark_pending(request: Any, item_id: str) -> None:
    """Called by the views: this request answered with a pending item (a no-op outside ASGI)."""
    scope = getattr(request, "scope", None)
    if isinstance(scope, dict):
        scope[PENDING_ITEM] = item_id


@db_call
def _current(item_id: str) -> dict | None:
    # The id is the one the Django view just answered with, after its own tenant lookup.
    item = (
        OutboxItem.objects.unscoped()
        .select_related("decided_by")
        .filter(pk=item_id)
        .defer("raw")
        .first()
    )
    return OutboxOut(outbound_record(item)).data if item is not None else None


@db_call
def _slot(scope: dict[str, Any]) -> tuple[Principal, Lease] | None:
    """The wait's credential and slot (429 ``rate_limited`` at the cap); None when the request
    carries no working credential, which the view then answers for. Not counted against the
    rate here: the view counts the request."""
    try:
        principal = gate.admit(scope, needs=None, count=False)
    except ApiError:
        return None
    return principal, open_slot(principal)


async def _take_slot(
    scope: dict[str, Any], receive: Receive, send: Send
) -> tuple[Principal, Lease] | None:
    """:func:`_slot` with the dashboard session resolved as on the wait and stream paths; the
    Django view keeps the request's own scope."""
    from channels.auth import AuthMiddlewareStack

    taken: list[tuple[Principal, Lease] | None] = []

    async def resolve(inner: dict[str, Any], _receive: Receive, _send: Send) -> None:
        taken.append(await settled(_slot(inner), lambda slot: slot[1] if slot else None))

    await AuthMiddlewareStack(resolve)(scope, receive, send)
    return taken[0]


async def wait_for_change(
    item_id: str, timeout: float, receive: Receive, principal: Principal | None
) -> dict | ApiError | None:
    """The item once its status changes or time is up; None if the client left; the error if
    the request's key was revoked or expired meanwhile. Also the MCP tool ``get_outbox_item``'s
    wait (``outbox.mcp.tools``)."""
    key = principal.key if principal is not None else None
    watch = None
    if principal is not None and key is not None:
        workspace_id, key_id = principal.workspace.pk, key.pk
        watch = lambda signal: key_watch().watch(workspace_id, key_id, signal)  # noqa: E731
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    # Subscribed before the first read of the row.
    async with listen(outbox_group(item_id), receive=receive, watch=watch) as listener:
        while True:
            current = await _current(item_id)
            if current is None or current["status"] != Status.PENDING:
                return current
            remaining = deadline - loop.time()
            if remaining <= 0:
                return current
            listener.signal_later(min(remaining, POLL_SECONDS), TIMEOUT)
            message = await listener.get()
            if message is CLOSED:
                return None
            if isinstance(message, ApiError):
                return message
            listener.cancel_timer(TIMEOUT)


def wait_for_decision(django_app: Any) -> Any:
    """Wraps ``django_app`` so that ``?wait=N`` (1..120) waits for a pending item's decision."""

    async def app(scope: dict[str, Any], receive: Receive, send: Send) -> None:
        raw_wait = query_params(scope).get("wait", "")
        if not raw_wait.isdigit() or not 0 < int(raw_wait) <= 120:
            await django_app(scope, receive, send)  # no waiting, or Django reports the error
            return
        try:
            taken = await _take_slot(scope, receive, send)
        except ApiError as exc:  # at the cap: refused before the view does anything
            await send_error(send, exc)
            return
        principal, lease = taken if taken is not None else (None, None)
        try:
            await _waiting(scope, receive, send, raw_wait, principal)
        finally:
            if lease is not None:
                await aclose_slot(lease)

    async def _waiting(
        scope: dict[str, Any],
        receive: Receive,
        send: Send,
        raw_wait: str,
        principal: Principal | None,
    ) -> None:
        started: dict[str, Any] = {}
        chunks: list[bytes] = []
        body_done = asyncio.Event()
        request_messages: list[dict[str, Any]] = []

        async def capture(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                started.update(message)
            elif message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))
                if not message.get("more_body"):
                    body_done.set()

        async def replay_receive() -> dict[str, Any]:
            message = await receive()
            request_messages.append(message)
            return message

        scope.pop(PENDING_ITEM, None)  # only the view may say it
        await django_app(scope, replay_receive, capture)
        body = b"".join(chunks)
        status = started.get("status", 500)
        item_id = scope.get(PENDING_ITEM)
        if item_id is None or status not in (200, 202):
            await send(started)
            await send({"type": "http.response.body", "body": body})
            return
        final = await wait_for_change(item_id, float(raw_wait), receive, principal)
        if final is None:
            return  # the client went away
        if isinstance(final, ApiError):
            await send_error(send, final)
            return
        # Still pending at the timeout: the view's own answer for a pending item (202 on the
        # send, 200 on GET /outbox/{id}, as without ``wait``); decided: 200.
        await send_json(send, status if final["status"] == Status.PENDING else 200, final)

    return app

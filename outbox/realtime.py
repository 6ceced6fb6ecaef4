"""``wait`` for outbox decisions without a thread: an ASGI wrapper in front of the Django views
of ``POST /inboxes/{id}/send`` and ``GET /outbox/{id}``. The view answers first (auth, checks,
the item); if the item is pending and ``wait`` asks for it, the wrapper listens on the item's
group through the process's wake-up hub (and re-reads the row every 2 s) until its status changes
or time is up."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from config.api.asgi import Receive, Send, db_call, query_params, send_json
from outbox.models import OutboxItem, Status
from outbox.serializers import OutboxOut
from outbox.services import outbound_record
from webhooks.events import outbox_group
from webhooks.hub import CLOSED, TIMEOUT, hub

POLL_SECONDS = 2.0


@db_call
def _current(item_id: str) -> dict | None:
    item = OutboxItem.objects.select_related("decided_by").filter(pk=item_id).defer("raw").first()
    return OutboxOut(outbound_record(item)).data if item is not None else None


async def _wait_for_change(item_id: str, timeout: float, receive: Receive) -> dict | None:
    listeners = hub()
    listener = await listeners.listen(outbox_group(item_id))  # before the first read
    disconnect = asyncio.ensure_future(_until_disconnect(receive))
    disconnect.add_done_callback(lambda _: listener.signal(CLOSED))
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    timer: asyncio.TimerHandle | None = None
    try:
        while True:
            current = await _current(item_id)
            if current is None or current["status"] != Status.PENDING:
                return current
            remaining = deadline - loop.time()
            if remaining <= 0:
                return current
            timer = loop.call_later(min(remaining, POLL_SECONDS), listener.signal, TIMEOUT)
            if await listener.get() is CLOSED:
                return None
            timer.cancel()
    finally:
        if timer is not None:
            timer.cancel()
        disconnect.cancel()
        listeners.leave(listener)


async def _until_disconnect(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


def wait_for_decision(django_app: Any) -> Any:
    """Wraps ``django_app`` so that ``?wait=N`` (1..120) waits for a pending item's decision."""

    async def app(scope: dict[str, Any], receive: Receive, send: Send) -> None:
        raw_wait = query_params(scope).get("wait", "")
        if not raw_wait.isdigit() or not 0 < int(raw_wait) <= 120:
            await django_app(scope, receive, send)  # no waiting, or Django reports the error
            return
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

        await django_app(scope, replay_receive, capture)
        body = b"".join(chunks)
        status = started.get("status", 500)
        try:
            item = json.loads(body) if status in (200, 202) else None
        except ValueError:
            item = None
        if not item or item.get("status") != Status.PENDING:
            await send(started)
            await send({"type": "http.response.body", "body": body})
            return
        final = await _wait_for_change(item["id"], float(raw_wait), receive)
        if final is None:
            return  # the client went away
        await send_json(send, 202 if final["status"] == Status.PENDING else 200, final)

    return app

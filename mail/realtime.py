"""Long-poll wait and the Server-Sent Events stream, as raw ASGI apps routed by Channels.

Neither holds a thread or a database connection while it waits: each does its database work in
short ``db_call``s, then parks in ``events.listen.listen()``: one queue fed by the process's
single channel-layer subscription per inbox (woken by ``events.emit`` after commit), by the
client's disconnect and by its own timer. The event log is the truth: the hub's
sweep re-reads it for every listening inbox at once, so a lost wake-up delays an event but never
loses it.

The wait's ``subject`` filter is a user's pattern: it is compiled and matched by
``config.patterns`` (a time limit per search, a budget per wait, never on the event loop), so a
catastrophic pattern costs its own wait a bounded moment and nobody else anything. Each open
wait or stream holds one of its key's ``MAX_OPEN_STREAMS_PER_KEY`` slots
(``apikeys.throttling.open_slot``) until it ends. The wait's loop (matching, finding, parking)
is ``mail.waiting``'s, shared with the MCP server's ``wait_for_email``.
"""

from __future__ import annotations

import json
from typing import Any

from django.utils import timezone
from rest_framework import serializers

from apikeys import gate
from apikeys.principal import Principal
from apikeys.throttling import Lease, aclose_slot, open_slot, settled
from config.api.asgi import (
    Receive,
    Send,
    db_call,
    header,
    query_pairs,
    send_empty,
    send_error,
    send_json,
)
from config.api.errors import ApiError, to_api_error
from config.api.query import validate_query
from events import services as events
from events.listen import (
    CLOSED,
    KEEPALIVE,
    TIMEOUT,
    Listener,
    cached,
    inbox_group,
    listen,
)
from events.models import Event
from inboxes import selectors as inbox_selectors
from inboxes.models import Inbox
from mail.waiting import ClientGone, WaitQuery, deadline_after, wait_for_email, watch_key

KEEPALIVE_SECONDS = 15.0  # stream: a comment line this often
REPLAY_BATCH = 1000  # stream: log rows read at a time when catching up
STREAM_EVENTS = (
    events.EMAIL_RECEIVED,
    events.EMAIL_LABELED,
    events.EMAIL_UPDATED,
    events.EMAIL_DELETED,
    events.MAIL_REJECTED,
)


STREAM_MAX_SECONDS = 86_400


class StreamQuery(serializers.Serializer):
    last_event_id = serializers.IntegerField(
        required=False, min_value=0, help_text="Resume after this event id (as Last-Event-ID)."
    )
    access_token = serializers.CharField(required=False, max_length=200)
    timeout = serializers.IntegerField(
        required=False,
        min_value=0,
        max_value=STREAM_MAX_SECONDS,
        help_text="End the stream after this many seconds (0: send what was missed, then end).",
    )


@db_call
def _open(
    scope: dict[str, Any],
    inbox_ref: str,
    query_class: type[serializers.Serializer],
    *,
    allow_query_token: bool,
) -> tuple[Principal, Inbox, dict[str, Any], Lease]:
    """Who asks, for which inbox, what (a pattern is compiled here, in a thread), and the slot
    the open request holds; each step's error before the next."""
    principal = gate.admit(scope, needs="read", allow_query_token=allow_query_token)
    inbox = inbox_selectors.inbox_get(principal.workspace, inbox_ref)
    query = validate_query(query_class, query_pairs(scope))
    return principal, inbox, query, open_slot(principal)


async def _admitted(
    scope: dict[str, Any],
    send: Send,
    query_class: type[serializers.Serializer],
    *,
    allow_query_token: bool,
) -> tuple[Principal, Inbox, dict[str, Any], Lease] | None:
    """:func:`_open` for the inbox of the route; None once the refusal has been answered."""
    try:
        return await settled(
            _open(
                scope,
                scope["url_route"]["kwargs"]["inbox_id"],
                query_class,
                allow_query_token=allow_query_token,
            ),
            lambda opened: opened[3],
        )
    except Exception as exc:
        error = to_api_error(exc)
        if error is None:
            raise
        await send_error(send, error)
        return None


async def wait_app(scope: dict[str, Any], receive: Receive, send: Send) -> None:
    """GET /inboxes/{id}/wait: 200 with the first matching email, 204 at the timeout."""
    started = timezone.now()
    opened = await _admitted(scope, send, WaitQuery, allow_query_token=False)
    if opened is None:
        return
    principal, inbox, query, lease = opened
    try:
        found = await wait_for_email(
            principal=principal,
            inbox=inbox,
            query=query,
            since=query.get("since") or started,
            deadline=deadline_after(query["timeout"]),  # the time spent looking counts too
            receive=receive,
        )
    except ClientGone:
        return
    except ApiError as error:  # the key was revoked or expired meanwhile
        await send_error(send, error)
        return
    finally:
        await aclose_slot(lease)
    if found is None:
        await send_empty(send, 204)
    else:
        await send_json(send, 200, found)


def stream_payload(event_type: str, inbox_id: str, data: dict[str, Any], at: int) -> dict:
    """The SSE ``data`` of an event, in the stream's camelCase layout (``at`` in Unix ms)."""
    email = data.get("email") or {}
    if event_type == events.EMAIL_RECEIVED:
        return {
            "type": event_type,
            "inboxId": inbox_id,
            "emailId": email.get("id"),
            "from": (email.get("from") or {}).get("address", ""),
            "subject": email.get("subject", ""),
            "code": (email.get("verification") or {}).get("code"),
            "at": at,
        }
    if event_type == events.EMAIL_LABELED:
        return {
            "type": event_type,
            "inboxId": inbox_id,
            "emailId": email.get("id"),
            "labels": data.get("labels", []),
            "at": at,
        }
    if event_type == events.EMAIL_UPDATED:
        return {
            "type": event_type,
            "inboxId": inbox_id,
            "emailId": email.get("id"),
            "read": email.get("read"),
            "starred": email.get("starred"),
            "labels": email.get("labels", []),
            "at": at,
        }
    if event_type == events.EMAIL_DELETED:
        return {"type": event_type, "inboxId": inbox_id, "emailId": email.get("id"), "at": at}
    return {
        "type": event_type,
        "inboxId": inbox_id,
        "from": data.get("from", ""),
        "reason": data.get("reason", ""),
        "at": at,
    }


def _frame(event_id: int, event_type: str, payload: dict) -> bytes:
    body = json.dumps(payload, separators=(",", ":"), ensure_ascii=False)
    return f"id: {event_id}\nevent: {event_type}\ndata: {body}\n\n".encode()


@db_call
def _events_after(inbox: Inbox, after: int) -> list[tuple[int, bytes]]:
    inbox_id = inbox.pk
    rows = (
        Event.objects.filter(workspace_id=inbox.workspace_id, inbox_id=inbox_id, id__gt=after)
        .order_by("id")
        .values_list("id", "type", "data", "created_at")[:REPLAY_BATCH]
    )
    frames: list[tuple[int, bytes]] = []
    for event_id, event_type, data, created_at in rows:
        if event_type in STREAM_EVENTS:
            at = int(created_at.timestamp() * 1000)
            frames.append(
                (
                    event_id,
                    _frame(event_id, event_type, stream_payload(event_type, inbox_id, data, at)),
                )
            )
        else:
            frames.append((event_id, b""))  # advances the cursor past events not streamed
    return frames


@db_call
def _latest_event(inbox: Inbox) -> int:
    last = Event.objects.filter(workspace_id=inbox.workspace_id, inbox_id=inbox.pk)
    return last.order_by("-id").values_list("id", flat=True).first() or 0


def _last_event_id(scope: dict[str, Any], query: dict[str, Any]) -> int | None:
    """Where to resume: the ``Last-Event-ID`` header (what EventSource sends back; a value that
    is not an event id of ours is ignored, as the SSE standard expects), else the validated
    ``last_event_id`` parameter."""
    raw = (header(scope, "last-event-id") or "").strip()
    if raw.isascii() and raw.isdigit():
        return int(raw)
    return query.get("last_event_id")


async def stream_app(scope: dict[str, Any], receive: Receive, send: Send) -> None:
    """GET /inboxes/{id}/stream: Server-Sent Events of one inbox, resumable by Last-Event-ID."""
    opened = await _admitted(scope, send, StreamQuery, allow_query_token=True)
    if opened is None:
        return
    principal, inbox, query, lease = opened
    try:
        async with listen(  # before reading the log
            inbox_group(inbox.pk), receive=receive, watch=watch_key(principal)
        ) as listener:
            await _stream(scope, send, inbox, query, listener)
    finally:
        await aclose_slot(lease)


async def _stream(
    scope: dict[str, Any], send: Send, inbox: Inbox, query: dict[str, Any], listener: Listener
) -> None:
    """The stream's response, from its headers to its end, fed by ``listener``."""
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [
                (b"content-type", b"text/event-stream; charset=utf-8"),
                (b"cache-control", b"no-cache"),
                (b"x-accel-buffering", b"no"),
                (b"x-content-type-options", b"nosniff"),
            ],
        }
    )
    resume = _last_event_id(scope, query)
    last = resume if resume is not None else await _latest_event(inbox)
    await send({"type": "http.response.body", "body": b": connected\n\n", "more_body": True})

    async def catch_up() -> None:
        nonlocal last
        while True:  # to the end of the log: nothing else would come back for the rest
            batch = await _events_after(inbox, last)
            for event_id, frame in batch:
                if frame:
                    body = {"type": "http.response.body", "body": frame, "more_body": True}
                    await send(body)
                last = event_id
            if len(batch) < REPLAY_BATCH:
                return

    await catch_up()
    if query.get("timeout") is not None:
        listener.signal_later(query["timeout"], TIMEOUT)
    listener.signal_every(KEEPALIVE_SECONDS, KEEPALIVE)
    while True:
        message = await listener.get()
        if message is CLOSED:
            return
        if isinstance(message, ApiError):  # the key was revoked or expired: the stream ends
            note = f": {message.code}: {message.message}\n\n".encode()
            await send({"type": "http.response.body", "body": note, "more_body": False})
            return
        if message is TIMEOUT:  # the client's own limit: end the response properly
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            return
        if message is KEEPALIVE:
            await send(
                {"type": "http.response.body", "body": b": keep-alive\n\n", "more_body": True}
            )
            continue
        if listener.lagged:
            listener.lagged = False
            await catch_up()
            continue
        if message["id"] <= last:
            continue
        if message.get("prev_id") != last:  # a gap in the chain: the log fills it
            await catch_up()
            continue
        last = message["id"]
        frame = cached(message, inbox.pk, lambda m=message: _wake_frame(m, inbox.pk))
        if frame:
            await send({"type": "http.response.body", "body": frame, "more_body": True})


def _wake_frame(message: dict[str, Any], inbox_id: str) -> bytes:
    """The SSE frame of a wake-up message (empty for events the stream does not carry)."""
    if message["event"] not in STREAM_EVENTS:
        return b""
    payload = stream_payload(message["event"], inbox_id, message["data"], message["at"])
    return _frame(message["id"], message["event"], payload)

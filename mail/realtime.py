"""Long-poll wait and the Server-Sent Events stream, as raw ASGI apps routed by Channels.

Neither holds a thread or a database connection while it waits: each does its database work in
short ``db_call``s, then awaits its :class:`webhooks.hub.Listener` — one queue fed by the
process's single channel-layer subscription per inbox (woken by ``webhooks.events`` after
commit), by the client's disconnect and by its own timer. The event log is the truth: the hub's
sweep re-reads it for every listening inbox at once, so a lost wake-up delays an event but never
loses it.
"""

from __future__ import annotations

import asyncio
import json
import re
from datetime import datetime
from typing import Any

from django.conf import settings
from django.utils import timezone
from rest_framework import serializers

from apikeys.authentication import principal_for_scope
from apikeys.principal import Principal
from apikeys.throttling import hit
from config.api.asgi import Receive, Send, db_call, query_params, send_empty, send_error, send_json
from config.api.errors import ApiError, InsufficientScope, RateLimited, to_api_error
from inboxes import selectors as inbox_selectors
from inboxes.models import Inbox
from mail.models import Email
from mail.selectors import email_get
from mail.serializers import EmailOut
from webhooks import events
from webhooks.hub import CLOSED, KEEPALIVE, TIMEOUT, cached, hub
from webhooks.models import Event

KEEPALIVE_SECONDS = 15.0  # stream: a comment line this often
STREAM_EVENTS = (
    events.EMAIL_RECEIVED,
    events.EMAIL_LABELED,
    events.EMAIL_UPDATED,
    events.EMAIL_DELETED,
    events.MAIL_REJECTED,
)


class WaitQuery(serializers.Serializer):
    timeout = serializers.IntegerField(min_value=0, max_value=120, default=30)
    since = serializers.DateTimeField(required=False)
    subject = serializers.CharField(required=False, max_length=500, allow_blank=True)

    def get_fields(self) -> dict[str, serializers.Field]:
        fields = super().get_fields()
        fields["from"] = serializers.CharField(required=False, max_length=320, allow_blank=True)
        return fields

    def validate_subject(self, value: str) -> re.Pattern[str]:
        try:
            return re.compile(value, re.IGNORECASE)
        except re.error as exc:
            raise serializers.ValidationError(f"Not a valid regular expression: {exc}.") from None


def _authorize(scope: dict[str, Any], *, allow_query_token: bool) -> Principal:
    principal = principal_for_scope(scope, allow_query_token=allow_query_token)
    if not principal.has("read"):
        raise InsufficientScope("read")
    wait = hit(principal.rate_limit_id, settings.RATE_LIMIT_PER_MINUTE)
    if wait is not None:
        raise RateLimited(headers={"Retry-After": str(max(1, int(wait)))})
    return principal


@db_call
def _open(scope: dict[str, Any], inbox_ref: str, *, allow_query_token: bool) -> Inbox:
    principal = _authorize(scope, allow_query_token=allow_query_token)
    return inbox_selectors.inbox_get(principal.workspace, inbox_ref)


def _matches(sender_address: str, sender_name: str, subject: str, query: dict[str, Any]) -> bool:
    wanted_from = (query.get("from") or "").lower()
    if wanted_from and wanted_from not in f"{sender_name} <{sender_address}>".lower():
        return False
    pattern = query.get("subject")
    return not (pattern is not None and not pattern.search(subject))


@db_call
def _find(inbox: Inbox, since: datetime, query: dict[str, Any], seen: set[str]) -> dict | None:
    """The full record of the oldest matching email received at or after ``since``."""
    candidates = (
        Email.objects.filter(inbox=inbox, received_at__gte=since)
        .exclude(pk__in=seen)
        .order_by("received_at", "pk")
        .values_list("pk", "from_address", "from_name", "subject")[:500]
    )
    for pk, address, name, subject in candidates:
        if _matches(address, name, subject, query):
            return EmailOut(email_get(inbox.workspace, pk)).data
        seen.add(pk)
    return None


@db_call
def _load(inbox: Inbox, email_id: str) -> dict | None:
    try:
        return EmailOut(email_get(inbox.workspace, email_id)).data
    except ApiError:
        return None  # deleted in the meantime


def _received_since(email: dict[str, Any], since: datetime) -> bool:
    received = email.get("received_at")
    if not received:
        return True
    try:
        return datetime.fromisoformat(received) >= since
    except ValueError:
        return True


async def wait_app(scope: dict[str, Any], receive: Receive, send: Send) -> None:
    """GET /inboxes/{id}/wait: 200 with the first matching email, 204 at the timeout."""
    inbox_ref = scope["url_route"]["kwargs"]["inbox_id"]
    started = timezone.now()
    try:
        form = WaitQuery(data=query_params(scope))
        inbox = await _open(scope, inbox_ref, allow_query_token=False)
        form.is_valid(raise_exception=True)
    except Exception as exc:
        error = to_api_error(exc)
        if error is None:
            raise
        await send_error(send, error)
        return
    query = dict(form.validated_data)
    since = query.get("since") or started
    listeners = hub()
    listener = await listeners.listen(events.inbox_group(inbox.pk))  # before the first read
    disconnect = asyncio.ensure_future(_wait_disconnect(receive))
    disconnect.add_done_callback(lambda _: listener.signal(CLOSED))
    timer: asyncio.TimerHandle | None = None
    seen: set[str] = set()
    try:
        found = await _find(inbox, since, query, seen)
        timer = asyncio.get_running_loop().call_later(query["timeout"], listener.signal, TIMEOUT)
        while found is None:
            message = await listener.get()
            if message is CLOSED:
                return
            if message is TIMEOUT:
                break
            if listener.lagged:  # dropped wake-ups: the log knows
                listener.lagged = False
                found = await _find(inbox, since, query, seen)
                continue
            if message.get("event") != events.EMAIL_RECEIVED:
                continue
            email = message["data"]["email"]
            sender = email.get("from") or {}
            if (
                email["id"] not in seen
                and _received_since(email, since)
                and _matches(
                    sender.get("address", ""), sender.get("name", ""), email["subject"], query
                )
            ):
                found = await _load(inbox, email["id"])
            seen.add(email["id"])
        if found is None:
            await send_empty(send, 204)
        else:
            await send_json(send, 200, found)
    finally:
        if timer is not None:
            timer.cancel()
        disconnect.cancel()
        listeners.leave(listener)


async def _wait_disconnect(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


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
def _events_after(inbox_id: str, after: int) -> list[tuple[int, bytes]]:
    rows = (
        Event.objects.filter(inbox_id=inbox_id, id__gt=after)
        .order_by("id")
        .values_list("id", "type", "data", "created_at")[:1000]
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
def _latest_event(inbox_id: str) -> int:
    last = Event.objects.filter(inbox_id=inbox_id).order_by("-id").values_list("id", flat=True)
    return last.first() or 0


def _last_event_id(scope: dict[str, Any]) -> int | None:
    from config.api.asgi import header

    raw = header(scope, "last-event-id") or query_params(scope).get("last_event_id")
    if raw is None or raw == "":
        return None
    try:
        return max(0, int(raw))
    except ValueError:
        return None


async def stream_app(scope: dict[str, Any], receive: Receive, send: Send) -> None:
    """GET /inboxes/{id}/stream: Server-Sent Events of one inbox, resumable by Last-Event-ID."""
    inbox_ref = scope["url_route"]["kwargs"]["inbox_id"]
    try:
        inbox = await _open(scope, inbox_ref, allow_query_token=True)
    except Exception as exc:
        error = to_api_error(exc)
        if error is None:
            raise
        await send_error(send, error)
        return
    listeners = hub()
    listener = await listeners.listen(events.inbox_group(inbox.pk))  # before reading the log
    disconnect = asyncio.ensure_future(_wait_disconnect(receive))
    disconnect.add_done_callback(lambda _: listener.signal(CLOSED))
    loop = asyncio.get_running_loop()
    timer: asyncio.TimerHandle | None = None

    def keep_alive() -> None:
        nonlocal timer
        listener.signal(KEEPALIVE)
        timer = loop.call_later(KEEPALIVE_SECONDS, keep_alive)

    try:
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
        resume = _last_event_id(scope)
        last = resume if resume is not None else await _latest_event(inbox.pk)
        await send({"type": "http.response.body", "body": b": connected\n\n", "more_body": True})

        async def catch_up() -> None:
            nonlocal last
            for event_id, frame in await _events_after(inbox.pk, last):
                if frame:
                    await send({"type": "http.response.body", "body": frame, "more_body": True})
                last = event_id

        await catch_up()
        timer = loop.call_later(KEEPALIVE_SECONDS, keep_alive)
        while True:
            message = await listener.get()
            if message is CLOSED:
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
    finally:
        if timer is not None:
            timer.cancel()
        disconnect.cancel()
        listeners.leave(listener)


def _wake_frame(message: dict[str, Any], inbox_id: str) -> bytes:
    """The SSE frame of a wake-up message (empty for events the stream does not carry)."""
    if message["event"] not in STREAM_EVENTS:
        return b""
    payload = stream_payload(message["event"], inbox_id, message["data"], message["at"])
    return _frame(message["id"], message["event"], payload)

"""The server-side wait for an email: the one loop that ``GET /inboxes/{id}/wait``
(``mail.realtime``) and the MCP tools ``wait_for_email`` / ``get_verification_code``
(``outbox.mcp``) both park in.

It holds no thread and no database connection while it waits: the database work is short
``db_call``s, and the wait itself is ``events.listen.listen()`` on the inbox's group (woken by
``events.emit`` after commit, by the hub's sweep when wake-ups were lost, by the caller's
disconnect, by a revoked key and by its own timer). The query (``from``, ``subject``, ``since``,
``timeout``) is validated by :class:`WaitQuery` for both surfaces, and the ``subject`` pattern is
matched by ``config.patterns`` (a time limit per search, a budget per wait, off the event loop).

It lives here, below both surfaces, rather than in ``mail.realtime``, so that the MCP server
reuses the REST wait's matching and finding instead of a copy of it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

from django.db.models import Q
from rest_framework import serializers

from apikeys.principal import Principal
from apikeys.watch import key_watch
from config.api.asgi import Receive, db_call
from config.api.errors import ApiError
from config.patterns import Budget, InvalidPattern, UserPattern, compile_user_pattern
from events import services as events
from events.listen import CLOSED, KEEPALIVE, TIMEOUT, Watch, inbox_group, listen
from inboxes.models import Inbox
from mail.models import Email
from mail.selectors import email_get
from mail.serializers import EmailOut

FIND_BATCH = 500  # emails read at a time when looking for a match
MAX_TIMEOUT = 120


class WaitQuery(serializers.Serializer):
    timeout = serializers.IntegerField(min_value=0, max_value=MAX_TIMEOUT, default=30)
    since = serializers.DateTimeField(required=False)
    subject = serializers.CharField(required=False, max_length=500, allow_blank=True)

    def get_fields(self) -> dict[str, serializers.Field]:
        fields = super().get_fields()
        fields["from"] = serializers.CharField(required=False, max_length=320, allow_blank=True)
        return fields

    def validate_subject(self, value: str) -> UserPattern:
        try:
            return compile_user_pattern(value)
        except InvalidPattern as exc:
            raise serializers.ValidationError(str(exc)) from None


class ClientGone(Exception):
    """The caller disconnected while waiting: there is nobody to answer."""


def watch_key(principal: Principal) -> Watch | None:
    """Tells the listener (with the error) when the request's key stops working: revoked,
    expired or deleted keys end waits within ``apikeys.watch.CHECK_SECONDS``."""
    key = principal.key
    if key is None:
        return None
    return lambda signal: key_watch().watch(principal.workspace.pk, key.pk, signal)


def from_matches(sender_address: str, sender_name: str, query: dict[str, Any]) -> bool:
    wanted_from = (query.get("from") or "").lower()
    return not wanted_from or wanted_from in f"{sender_name} <{sender_address}>".lower()


def _matches(
    sender_address: str, sender_name: str, subject: str, query: dict[str, Any], budget: Budget
) -> bool:
    """Whether an email passes the wait's filters; blocking (call it from a thread)."""
    if not from_matches(sender_address, sender_name, query):
        return False
    pattern: UserPattern | None = query.get("subject")
    return pattern is None or pattern.search(subject, budget).matched


async def _subject_matches(subject: str, query: dict[str, Any], budget: Budget) -> bool:
    pattern: UserPattern | None = query.get("subject")
    return pattern is None or (await pattern.asearch(subject, budget)).matched


Accept = Callable[[dict[str, Any]], bool]


@db_call
def find(
    inbox: Inbox,
    since: datetime,
    query: dict[str, Any],
    seen: set[str],
    budget: Budget,
    accept: Accept | None = None,
) -> dict | None:
    """The full record of the oldest matching email received at or after ``since``, read in
    batches to the end of the inbox (a long run of mail that does not match cannot hide it;
    a pattern that spends the wait's ``budget`` matches nothing more, so the read stays short).
    ``accept`` looks at a match's record too (``get_verification_code``: one with a code)."""
    after: tuple[datetime, str] | None = None
    while True:
        candidates = Email.objects.filter(inbox=inbox, received_at__gte=since)
        if query.get("unread_only"):  # not a REST parameter: get_verification_code's
            candidates = candidates.filter(read=False)
        if after is not None:
            candidates = candidates.filter(
                Q(received_at__gt=after[0]) | Q(received_at=after[0], pk__gt=after[1])
            )
        rows = list(
            candidates.order_by("received_at", "pk").values_list(
                "pk", "from_address", "from_name", "subject", "received_at"
            )[:FIND_BATCH]
        )
        for pk, address, name, subject, _ in rows:
            if pk in seen:
                continue
            if _matches(address, name, subject, query, budget):
                record = EmailOut(email_get(inbox.workspace, pk)).data
                if accept is None or accept(record):
                    return record
            seen.add(pk)
        if len(rows) < FIND_BATCH:
            return None
        after = (rows[-1][4], rows[-1][0])


@db_call
def load(inbox: Inbox, email_id: str) -> dict | None:
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


async def wait_for_email(
    *,
    principal: Principal,
    inbox: Inbox,
    query: dict[str, Any],
    since: datetime,
    deadline: float,
    receive: Receive | None = None,
    tick: Callable[[], Awaitable[None]] | None = None,
    tick_seconds: float = 5.0,
    accept: Accept | None = None,
) -> dict | None:
    """The first email of ``inbox`` that matches ``query`` and arrived at or after ``since``
    (its full API record), or None once the event loop's clock passes ``deadline``.

    Raises :class:`ClientGone` when ``receive`` reports a disconnect, and the key's error
    (``unauthorized``) when the key is revoked or expires meanwhile. ``tick`` is awaited every
    ``tick_seconds`` while nothing has arrived (MCP progress notifications); ``accept``, when
    given, must also approve a matching email's record."""
    budget = Budget()
    seen: set[str] = set()
    async with listen(  # before the first read
        inbox_group(inbox.pk), receive=receive, watch=watch_key(principal)
    ) as listener:
        found = await find(inbox, since, query, seen, budget, accept)
        listener.signal_at(deadline, TIMEOUT)
        if tick is not None:
            listener.signal_every(tick_seconds, KEEPALIVE)
        while found is None:
            message = await listener.get()
            if message is CLOSED:
                raise ClientGone()
            if isinstance(message, ApiError):  # the key was revoked or expired meanwhile
                raise message
            if message is TIMEOUT:
                return None
            if message is KEEPALIVE:
                if tick is not None:
                    await tick()
                continue
            if listener.lagged:  # dropped wake-ups: the log knows
                listener.lagged = False
                found = await find(inbox, since, query, seen, budget, accept)
                continue
            if message.get("event") != events.EMAIL_RECEIVED:
                continue
            email = message["data"]["email"]
            sender = email.get("from") or {}
            if (
                email["id"] not in seen
                and _received_since(email, since)
                and from_matches(sender.get("address", ""), sender.get("name", ""), query)
                and await _subject_matches(email["subject"], query, budget)
            ):
                found = await load(inbox, email["id"])
                if found is not None and accept is not None and not accept(found):
                    found = None
            seen.add(email["id"])
        return found


def deadline_after(seconds: float) -> float:
    """The event-loop time ``seconds`` from now (the time spent looking counts too)."""
    return asyncio.get_running_loop().time() + seconds

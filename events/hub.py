"""Wake-ups inside one web process: one channel-layer channel per process, fanned out in memory.
Requests park through :func:`events.listen.listen`, which uses this hub.

Every waiter and stream of the process registers a :class:`Listener` on a group (an inbox, or an
outbox item) instead of opening a channel of its own: the process subscribes to each group once,
decodes each wake-up once and hands the same message dict to every listener's queue (streams frame
it once for all of them through :func:`cached`). A group stays subscribed for ``LINGER_SECONDS``
after its last listener leaves, so a waiter that parks again on the same inbox finds it ready.

The event log is the truth. Every ``SWEEP_SECONDS`` one query per process re-reads the recent log
of the inboxes that have listeners and hands them any event whose wake-up never arrived here: a
lost wake-up delays an event by a few seconds and never loses it. Listeners ignore what they have
already seen, so a message may safely arrive twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from channels.layers import get_channel_layer
from django.db.models import Q
from django.utils import timezone

from config.api.asgi import db_call
from events.models import Event
from events.wake import WORKSPACE_EVENTS, groups_of, inbox_group, served_by, wake_message

logger = logging.getLogger(__name__)

SWEEP_SECONDS = 5.0  # re-read the log for lost wake-ups this often
SWEEP_MARGIN = timedelta(seconds=30)  # ... back to this long before the previous sweep
LINGER_SECONDS = 30.0  # keep an idle group subscribed this long
QUEUE_LIMIT = 1000  # a listener this far behind is told to re-read the log instead

CLOSED = object()  # the client went away
TIMEOUT = object()  # the listener's own timer fired
KEEPALIVE = object()  # time for a stream's keep-alive comment


class Listener:
    """One waiter's or stream's queue of wake-up messages (dicts) and signals (the sentinels)."""

    __slots__ = ("group", "lagged", "queue", "timers")

    def __init__(self, group: str) -> None:
        self.group = group
        self.queue: asyncio.Queue[Any] = asyncio.Queue()
        self.lagged = False  # messages were dropped: read the log before trusting the queue
        self.timers: dict[object, asyncio.TimerHandle] = {}  # one per sentinel; gone on leave

    def push(self, message: dict[str, Any]) -> None:
        if self.queue.qsize() >= QUEUE_LIMIT:
            self.lagged = True
            return
        self.queue.put_nowait(message)

    def signal(self, sentinel: object) -> None:
        self.queue.put_nowait(sentinel)

    async def get(self) -> Any:
        return await self.queue.get()

    def signal_at(self, when: float, sentinel: object) -> None:
        """Signals ``sentinel`` at ``when`` (the loop's clock) unless the listener leaves first;
        replaces the pending timer of the same sentinel, if any."""
        self.cancel_timer(sentinel)
        self.timers[sentinel] = asyncio.get_running_loop().call_at(when, self.signal, sentinel)

    def signal_later(self, delay: float, sentinel: object) -> None:
        """:meth:`signal_at` ``delay`` seconds from now."""
        self.signal_at(asyncio.get_running_loop().time() + delay, sentinel)

    def signal_every(self, interval: float, sentinel: object) -> None:
        """Signals ``sentinel`` every ``interval`` seconds until the listener leaves."""
        loop = asyncio.get_running_loop()

        def tick() -> None:
            self.signal(sentinel)
            self.timers[sentinel] = loop.call_later(interval, tick)

        self.cancel_timer(sentinel)
        self.timers[sentinel] = loop.call_later(interval, tick)

    def cancel_timer(self, sentinel: object) -> None:
        timer = self.timers.pop(sentinel, None)
        if timer is not None:
            timer.cancel()

    def cancel_timers(self) -> None:
        for sentinel in list(self.timers):
            self.cancel_timer(sentinel)


def cached(message: dict[str, Any], key: str, make: Callable[[], Any]) -> Any:
    """``make()``'s result, computed once per message however many listeners ask for it."""
    memo = message.setdefault("_memo", {})
    if key not in memo:
        memo[key] = make()
    return memo[key]


@db_call
def _recent(inbox_ids: list[str], workspace_ids: list[str], since: Any) -> list[Event]:
    """The events logged since ``since`` of the listening inboxes and workspaces (ids, types and
    where they belong: the data is read only for those a listener missed)."""
    # The process's one subscriber, for every listening inbox of every workspace at once.
    rows = Event.objects.unscoped().filter(created_at__gte=since)
    where = Q(inbox_id__in=inbox_ids) if inbox_ids else Q()
    if workspace_ids:
        wanted = Q(workspace_id__in=workspace_ids, type__in=WORKSPACE_EVENTS)
        where = where | wanted if inbox_ids else wanted
    return list(rows.filter(where).only("id", "inbox_id", "workspace_id", "type"))


@db_call
def _messages(ids: list[int]) -> dict[int, dict[str, Any]]:
    return {
        event.pk: wake_message(event)
        for event in Event.objects.unscoped().filter(pk__in=ids).order_by("id")
    }


class Hub:
    """The listeners of one event loop (one web process)."""

    def __init__(self) -> None:
        self.layer = get_channel_layer()
        self.channel: str | None = None
        self.listeners: dict[str, set[Listener]] = {}
        self.subscriptions: dict[str, asyncio.Future[None]] = {}
        self.idle_since: dict[str, float] = {}
        self.seen: dict[tuple[str, int], float] = {}  # (group, event id) handed out, and when
        self._start = asyncio.Lock()
        self._tasks: list[asyncio.Task[None]] = []

    async def listen(self, group: str) -> Listener:
        """A listener on ``group``; returns once the process is subscribed to it."""
        await self._ensure_started()
        listener = Listener(group)
        self.listeners.setdefault(group, set()).add(listener)
        self.idle_since.pop(group, None)
        subscription = self.subscriptions.get(group)
        if subscription is None:
            subscription = asyncio.ensure_future(self.layer.group_add(group, self.channel))
            self.subscriptions[group] = subscription
        try:
            await asyncio.shield(subscription)
        except Exception:
            self.subscriptions.pop(group, None)
            self.leave(listener)
            raise
        return listener

    def leave(self, listener: Listener) -> None:
        members = self.listeners.get(listener.group)
        if members is None:
            return
        members.discard(listener)
        if not members:
            del self.listeners[listener.group]
            self.idle_since[listener.group] = time.monotonic()

    def dispatch(self, message: dict[str, Any]) -> None:
        group = message.get("group") or inbox_group(message.get("inbox_id", ""))
        if "id" in message:
            self.seen[(group, message["id"])] = time.monotonic()
        for listener in tuple(self.listeners.get(group, ())):
            listener.push(message)

    async def _ensure_started(self) -> None:
        if self.channel is not None:
            return
        async with self._start:
            if self.channel is None:
                channel = await self.layer.new_channel()
                self._tasks = [
                    asyncio.ensure_future(self._read(channel)),
                    asyncio.ensure_future(self._sweep_forever()),
                ]
                self.channel = channel

    async def _read(self, channel: str) -> None:
        while True:
            try:
                message = await self.layer.receive(channel)
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.exception("channel layer receive failed; retrying")
                await asyncio.sleep(1)
                continue
            self.dispatch(message)

    async def _sweep_forever(self) -> None:
        previous = timezone.now()
        while True:
            await asyncio.sleep(SWEEP_SECONDS * random.uniform(0.8, 1.2))
            started = timezone.now()
            try:
                await self.sweep(since=previous - SWEEP_MARGIN)
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.exception("wake-up sweep failed; the next one reads further back")
                continue
            previous = started

    async def sweep(self, *, since: Any) -> int:
        """Hands listeners the logged events since ``since`` they were not woken for."""
        await self._drop_idle()
        horizon = time.monotonic() - 2 * (SWEEP_MARGIN.total_seconds() + SWEEP_SECONDS)
        self.seen = {k: v for k, v in self.seen.items() if v >= horizon}
        inbox_ids = [g.removeprefix("inbox.") for g in self.listeners if g.startswith("inbox.")]
        workspace_ids = [
            g.removeprefix("workspace.") for g in self.listeners if g.startswith("workspace.")
        ]
        if not inbox_ids and not workspace_ids:
            return 0
        missing = [
            (group, event.pk)
            for event in await _recent(inbox_ids, workspace_ids, since)
            for group in groups_of(event)
            if group in self.listeners and (group, event.pk) not in self.seen
        ]
        if not missing:
            return 0
        messages = await _messages(sorted({event_id for _, event_id in missing}))
        for group, event_id in sorted(missing, key=lambda pair: pair[1]):
            if event_id in messages:
                self.dispatch({**messages[event_id], "group": group})
        return len(missing)

    async def _drop_idle(self) -> None:
        cutoff = time.monotonic() - LINGER_SECONDS
        for group, since in list(self.idle_since.items()):
            if since <= cutoff and group not in self.listeners:
                del self.idle_since[group]
                self.subscriptions.pop(group, None)
                with contextlib.suppress(Exception):
                    await self.layer.group_discard(group, self.channel)


_hubs: dict[asyncio.AbstractEventLoop, Hub] = {}


def hub() -> Hub:
    """The hub of the running event loop (daphne runs one loop per process)."""
    loop = asyncio.get_running_loop()
    current = _hubs.get(loop)
    if current is None:
        for stale in [other for other in _hubs if other.is_closed()]:
            del _hubs[stale]
        current = _hubs[loop] = Hub()
        served_by(loop)
    return current

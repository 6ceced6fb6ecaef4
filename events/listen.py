"""``listen()``: the one way a request parks until an event, a signal or a timeout (the inbox
wait, the stream, the outbox wait and whatever comes next).

It subscribes a listener to a group through the process's hub before the body runs (so a reader
that then looks at the log misses nothing), signals ``CLOSED`` when the client disconnects and
whatever a ``watch`` reports (e.g. a revoked key's error), and on the way out cancels the
listener's timers, stops the watch and leaves the group, however the body ends.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable

from config.api.asgi import Receive, wait_for_disconnect
from events.hub import CLOSED, KEEPALIVE, TIMEOUT, Listener, cached, hub
from events.wake import inbox_group

__all__ = ["CLOSED", "KEEPALIVE", "TIMEOUT", "Listener", "Watch", "cached", "inbox_group", "listen"]

# Starts watching something that may end the wait, telling the listener through the callback it
# is given (a sentinel or an ApiError); returns the function that stops watching.
Watch = Callable[[Callable[[object], None]], Callable[[], None]]


@contextlib.asynccontextmanager
async def listen(
    group: str | None, *, receive: Receive | None = None, watch: Watch | None = None
) -> AsyncIterator[Listener]:
    """A listener on ``group``, subscribed before the body runs and gone when it ends. With no
    group, a listener of signals only (its owner pushes it what it should see: the inbox wait
    hears its group's events through one shared listener, ``mail.waiting``)."""
    listeners = hub()
    listener = await listeners.listen(group) if group is not None else Listener("")
    unwatch: Callable[[], None] = lambda: None  # noqa: E731
    disconnect: asyncio.Future[None] | None = None
    try:
        if watch is not None:
            unwatch = watch(listener.signal)
        if receive is not None:
            disconnect = asyncio.ensure_future(wait_for_disconnect(receive))
            disconnect.add_done_callback(lambda _: listener.signal(CLOSED))
        yield listener
    finally:
        listener.cancel_timers()
        if disconnect is not None:
            disconnect.cancel()
        unwatch()
        if group is not None:
            listeners.leave(listener)

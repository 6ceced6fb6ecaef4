"""Long-lived requests notice when the key that opened them stops being valid.

A request is authorized once, when it arrives; a long-poll wait or an SSE stream then lives for
minutes. Each event loop (web process) keeps a :class:`KeyWatch` of the keys its long-lived
requests were opened with. One query asks which of them are revoked, expired or gone, and their
requests are told at once (a wait answers 401, a stream ends). The watch asks when any key or
workspace changes anywhere (every commit that bumps ``apikeys.epoch`` wakes the channel-layer
group ``epoch.GROUP``, which the watch listens on through ``events.listen``) and every
``settings.KEY_WATCH_SECONDS`` (0.25) in any case, for a lost wake-up and for expiry. So a revoked
key's waits and streams end about one query after the revocation commits, and never more than
the period plus one query after it, at the cost of one indexed query per process per period while
such requests are open (none otherwise) and one per change of a key or workspace.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable

from django.conf import settings

from apikeys import epoch, selectors
from config.api.asgi import db_call
from config.api.errors import ApiError
from events.listen import TIMEOUT, Listener, listen

logger = logging.getLogger(__name__)

OnInvalid = Callable[[ApiError], None]
RELISTEN_SECONDS = 30.0  # after the watch could not listen for changes, it tries again this often


@db_call
def _invalid(keys: list[tuple[str, str]]) -> dict[str, ApiError]:
    return selectors.api_keys_invalid(keys)


class KeyWatch:
    """The watched keys of one event loop and, per key, what to call when it stops working."""

    def __init__(self) -> None:
        self.watchers: dict[tuple[str, str], dict[int, OnInvalid]] = {}
        self._tokens = itertools.count()
        self._task: asyncio.Task[None] | None = None

    def watch(self, workspace_id: str, key_id: str, on_invalid: OnInvalid) -> Callable[[], None]:
        """Calls ``on_invalid(error)`` once the key is revoked, expired or deleted (within
        ``KEY_WATCH_SECONDS`` and a query); returns the function that stops watching."""
        token = next(self._tokens)
        key = (workspace_id, key_id)
        self.watchers.setdefault(key, {})[token] = on_invalid
        if self._task is None or self._task.done():
            self._task = asyncio.ensure_future(self._run())

        def unwatch() -> None:
            callbacks = self.watchers.get(key)
            if callbacks is not None:
                callbacks.pop(token, None)
                if not callbacks:
                    del self.watchers[key]

        return unwatch

    async def check(self) -> int:
        """One round: tells the watchers of every key that no longer authenticates."""
        if not self.watchers:
            return 0
        invalid = await _invalid(list(self.watchers))
        told = 0
        for key in [key for key in self.watchers if key[1] in invalid]:
            for on_invalid in self.watchers.pop(key).values():
                on_invalid(invalid[key[1]])
                told += 1
        return told

    async def _run(self) -> None:
        while True:
            try:
                async with listen(epoch.GROUP) as changes:
                    await self._check_forever(changes)
            except asyncio.CancelledError:
                raise
            except Exception:  # e.g. Redis unreachable: the periodic check alone for a while
                logger.exception(
                    "key watch cannot listen for changes; checking every %s s, listening again "
                    "in %s s",
                    settings.KEY_WATCH_SECONDS,
                    RELISTEN_SECONDS,
                )
                loop = asyncio.get_running_loop()
                await self._check_forever(None, until=loop.time() + RELISTEN_SECONDS)

    async def _check_forever(self, changes: Listener | None, until: float | None = None) -> None:
        loop = asyncio.get_running_loop()
        while until is None or loop.time() < until:
            if changes is None:  # until the next period, or the time to listen again
                period = settings.KEY_WATCH_SECONDS
                await asyncio.sleep(period if until is None else min(period, until - loop.time()))
            else:  # a change of a key or workspace anywhere, or the period
                changes.signal_later(settings.KEY_WATCH_SECONDS, TIMEOUT)
                await changes.get()
                while not changes.queue.empty():  # a burst of changes: one check for all
                    changes.queue.get_nowait()
            try:
                await self.check()
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.exception("key watch failed; checking again at the next change or period")


_watches: dict[asyncio.AbstractEventLoop, KeyWatch] = {}


def key_watch() -> KeyWatch:
    """The key watch of the running event loop (daphne runs one loop per process)."""
    loop = asyncio.get_running_loop()
    current = _watches.get(loop)
    if current is None:
        for stale in [other for other in _watches if other.is_closed()]:
            del _watches[stale]
        current = _watches[loop] = KeyWatch()
    return current

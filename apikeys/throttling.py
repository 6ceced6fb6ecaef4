"""Per-credential limits: ``RATE_LIMIT_PER_MINUTE`` requests per fixed one-minute window, and
``MAX_OPEN_STREAMS_PER_KEY`` open streams and waits at once.

The request counter lives in Redis when ``REDIS_URL`` is set (so every web process shares it;
``INCR`` is atomic there), else in the local cache of the embedded mode. The answer beyond the
limit is ``429 rate_limited`` with ``Retry-After``.

Open streams and waits hold a slot each: a lease in a Redis sorted set per credential (member a
random token, score the lease's expiry), taken by one atomic script that first drops expired
leases and then adds one only below the cap. Each process renews the leases it holds every
``LEASE_RENEW_SECONDS`` from one thread; a process that dies stops renewing, and its slots come
free ``LEASE_SECONDS`` later instead of never. Without Redis (embedded mode: one process) the
slots are a counter in memory.

A slot is taken in a thread (Redis is blocking) by a request that may be cancelled meanwhile (its
client left, an MCP call's task group was cancelled): :func:`settled` awaits such a call so that
a slot it took after its caller was cancelled is given back, never renewed for the life of the
process; :func:`aclose_slot` gives a slot back even when its caller is being cancelled.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import secrets
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import redis
from django.conf import settings
from django.core.cache import cache
from rest_framework.request import Request
from rest_framework.throttling import BaseThrottle

from apikeys.principal import Principal
from config.api.errors import RateLimited

logger = logging.getLogger(__name__)

WINDOW_SECONDS = 60
LEASE_SECONDS = 60  # a slot not renewed for this long is free again (its process died)
LEASE_RENEW_SECONDS = 15
OPEN_RETRY_AFTER = 5  # seconds: when a slot comes free is not known; a polite pause
COUNTED = "rate_counted"  # Principal.extra: this request's count is taken (its wait, or None)


@functools.cache
def _redis() -> redis.Redis | None:
    """One client (one connection pool) per process, shared by every thread and request.

    Django's cache handler keeps a cache object per asyncio context, and so a pool per request in
    the raw ASGI endpoints; a counter needs none of that.
    """
    url = getattr(settings, "REDIS_URL", "")
    return redis.Redis.from_url(url) if url else None


def rate_key(identity: str, now: float) -> str:
    """The Redis (or local cache) counter of ``identity``'s requests in the window of ``now``."""
    return f"pgh:rl:{identity}:{int(now // WINDOW_SECONDS)}"


def wait_after(count: int, limit: int, now: float) -> float | None:
    """None when the ``count``-th request of the window is allowed, else the seconds until the
    window ends."""
    if count > limit:
        return (int(now // WINDOW_SECONDS) + 1) * WINDOW_SECONDS - now
    return None


def hit(identity: str, limit: int, now: float | None = None) -> float | None:
    """Counts one request; returns None when allowed, else the seconds until the window ends."""
    now = time.time() if now is None else now
    key = rate_key(identity, now)
    client = _redis()
    if client is not None:
        pipe = client.pipeline(transaction=False)
        pipe.incr(key)
        pipe.expire(key, WINDOW_SECONDS + 5, nx=True)
        count = int(pipe.execute()[0])
    elif cache.add(key, 1, timeout=WINDOW_SECONDS + 5):
        count = 1
    else:
        try:
            count = cache.incr(key)
        except ValueError:  # expired between add and incr
            cache.add(key, 1, timeout=WINDOW_SECONDS + 5)
            count = 1
    return wait_after(count, limit, now)


def throttle(principal: Principal) -> None:
    """Counts one request of ``principal``'s credential; 429 ``rate_limited`` with
    ``Retry-After`` beyond ``RATE_LIMIT_PER_MINUTE`` (the one rate rule: ``apikeys.gate``).

    A principal whose authentication already counted the request (``apikeys.keycache``: the
    counter rides in the pipeline that checks the credentials epoch) is not counted again."""
    if COUNTED in principal.extra:
        wait = principal.extra[COUNTED]
    else:
        wait = hit(principal.rate_limit_id, settings.RATE_LIMIT_PER_MINUTE)
    if wait is not None:
        raise RateLimited(headers={"Retry-After": str(max(1, int(wait)))})


class KeyRateThrottle(BaseThrottle):
    """DRF's throttle: :func:`throttle` for every authenticated request."""

    def allow_request(self, request: Request, view: Any) -> bool:
        if isinstance(request.auth, Principal):
            throttle(request.auth)
        return True


class TooManyOpen(RateLimited):
    message = "Too many open streams and waits for this key."


@dataclass(frozen=True)
class Lease:
    """One open stream or wait's slot."""

    identity: str
    token: str


# Redis: drop expired leases, then take one if below the cap (1) or not (0), atomically.
_TAKE = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then return 0 end
redis.call('ZADD', KEYS[1], ARGV[3], ARGV[4])
redis.call('EXPIRE', KEYS[1], ARGV[5])
return 1
"""


def _slots_key(identity: str) -> str:
    return f"pgh:open:{identity}"


class _Slots:
    """The slots this process holds, and (without Redis) every slot there is."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.held: dict[Lease, None] = {}  # renewed while here
        self.counts: dict[str, int] = {}  # embedded mode only
        self.renewer: threading.Thread | None = None

    def take(self, identity: str, limit: int, now: float) -> Lease | None:
        lease = Lease(identity, secrets.token_hex(8))
        client = _redis()
        if client is None:
            with self.lock:
                if self.counts.get(identity, 0) >= limit:
                    return None
                self.counts[identity] = self.counts.get(identity, 0) + 1
                self.held[lease] = None
            return lease
        taken = client.eval(
            _TAKE,
            1,
            _slots_key(identity),
            now,
            limit,
            now + LEASE_SECONDS,
            lease.token,
            LEASE_SECONDS + 5,
        )
        if not int(taken):
            return None
        with self.lock:
            self.held[lease] = None
            if self.renewer is None:
                self.renewer = threading.Thread(target=self._renew, name="slot-renew", daemon=True)
                self.renewer.start()
        return lease

    def forget(self, lease: Lease) -> bool:
        """Stops renewing ``lease`` (without Redis: frees it); True if Redis must drop it."""
        with self.lock:
            if lease not in self.held:
                return False
            del self.held[lease]
            if _redis() is not None:
                return True
            self.counts[lease.identity] -= 1
            if not self.counts[lease.identity]:
                del self.counts[lease.identity]
            return False

    @staticmethod
    def drop(lease: Lease) -> None:
        try:
            _redis().zrem(_slots_key(lease.identity), lease.token)  # type: ignore[union-attr]
        except Exception:  # no longer renewed: the slot comes free when its lease runs out
            logger.exception("could not give back an open-stream slot")

    def _renew(self) -> None:
        while True:
            time.sleep(LEASE_RENEW_SECONDS)
            self.renew()

    def renew(self, now: float | None = None) -> int:
        """Pushes the expiry of every lease this process holds ``LEASE_SECONDS`` past ``now``
        (a lease given back meanwhile is not re-added); the number renewed."""
        with self.lock:
            leases = list(self.held)
        client = _redis()
        if not leases or client is None:
            return 0
        # Two commands per credential, not per lease: this thread holds the GIL while it builds
        # the pipeline, and thousands of open streams would stall the event loop meanwhile.
        tokens: dict[str, list[str]] = {}
        for lease in leases:
            tokens.setdefault(lease.identity, []).append(lease.token)
        try:
            expires = (time.time() if now is None else now) + LEASE_SECONDS
            pipe = client.pipeline(transaction=False)
            for identity, held in tokens.items():
                pipe.zadd(_slots_key(identity), dict.fromkeys(held, expires), xx=True)
                pipe.expire(_slots_key(identity), LEASE_SECONDS + 5)
            pipe.execute()
        except Exception:  # Redis away for a moment: the next round tries again
            logger.exception("could not renew %d open-stream slots", len(leases))
            return 0
        return len(leases)


_slots = _Slots()


def open_slot(principal: Principal, now: float | None = None) -> Lease:
    """A slot for one more open stream or wait of ``principal``'s credential, or 429
    ``rate_limited`` naming the limit. Blocking (Redis): call it from a thread."""
    limit = settings.MAX_OPEN_STREAMS_PER_KEY
    lease = _slots.take(principal.rate_limit_id, limit, time.time() if now is None else now)
    if lease is None:
        raise TooManyOpen(
            f"Too many open streams and waits for this key: at most {limit} at once "
            "(MAX_OPEN_STREAMS_PER_KEY). Close one, then retry.",
            headers={"Retry-After": str(OPEN_RETRY_AFTER)},
        )
    return lease


def close_slot(lease: Lease) -> None:
    """Gives the slot back. Blocking (Redis): call it from a thread."""
    if _slots.forget(lease):
        _slots.drop(lease)


async def aclose_slot(lease: Lease) -> None:
    """:func:`close_slot` from async code: the lease is no longer renewed from the first line on,
    and the drop runs to its end even when the caller is cancelled while it waits for it (an
    anyio cancel scope cancels every later ``await`` of a cancelled task)."""
    if _slots.forget(lease):
        await asyncio.shield(asyncio.to_thread(_slots.drop, lease))


T = TypeVar("T")


async def settled(call: Awaitable[T], lease_of: Callable[[T], Lease | None]) -> T:
    """``await call`` — a thread's work that ends by taking a slot (:func:`open_slot`) — such
    that a caller cancelled before the result reaches it does not keep the slot: the work runs
    to its end, and the slot it took (``lease_of(result)``) is given back then."""
    future = asyncio.ensure_future(call)
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:
        future.add_done_callback(functools.partial(_give_back, lease_of))
        raise


def _give_back(lease_of: Callable[[Any], Lease | None], done: asyncio.Future) -> None:
    if done.cancelled() or done.exception() is not None:
        return
    lease = lease_of(done.result())
    if lease is not None and _slots.forget(lease):
        threading.Thread(target=_slots.drop, args=(lease,), name="slot-drop", daemon=True).start()

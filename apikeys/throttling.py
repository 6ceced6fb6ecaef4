"""Per-credential rate limit: ``RATE_LIMIT_PER_MINUTE`` requests per fixed one-minute window.

The counter lives in Redis when ``REDIS_URL`` is set (so every web process shares it; ``INCR`` is
atomic there), else in the local cache of the embedded mode. The answer beyond the limit is
``429 rate_limited`` with ``Retry-After``.
"""

from __future__ import annotations

import functools
import time
from typing import Any

import redis
from django.conf import settings
from django.core.cache import cache
from rest_framework.request import Request
from rest_framework.throttling import BaseThrottle

from apikeys.principal import Principal

WINDOW_SECONDS = 60


@functools.cache
def _redis() -> redis.Redis | None:
    """One client (one connection pool) per process, shared by every thread and request.

    Django's cache handler keeps a cache object per asyncio context, and so a pool per request in
    the raw ASGI endpoints; a counter needs none of that.
    """
    url = getattr(settings, "REDIS_URL", "")
    return redis.Redis.from_url(url) if url else None


def hit(identity: str, limit: int, now: float | None = None) -> float | None:
    """Counts one request; returns None when allowed, else the seconds until the window ends."""
    now = time.time() if now is None else now
    window = int(now // WINDOW_SECONDS)
    key = f"pgh:rl:{identity}:{window}"
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
    if count > limit:
        return (window + 1) * WINDOW_SECONDS - now
    return None


class KeyRateThrottle(BaseThrottle):
    def __init__(self) -> None:
        self._wait: float | None = None

    def allow_request(self, request: Request, view: Any) -> bool:
        principal = request.auth
        if not isinstance(principal, Principal):
            return True
        self._wait = hit(principal.rate_limit_id, settings.RATE_LIMIT_PER_MINUTE)
        return self._wait is None

    def wait(self) -> float | None:
        return self._wait

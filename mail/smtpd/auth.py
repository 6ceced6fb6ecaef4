"""SMTP AUTH with an inbox's sandbox credentials: the dialogue (PLAIN and LOGIN) and the limit on
failures.

A session that authenticates with a credential (``inboxes.SmtpCredential``) may address any
recipients: RCPT accepts every well-formed address (up to ``MAX_RECIPIENTS``), and DATA stores
the message once in the credential's inbox with every recipient recorded (``pipeline.Incoming.
credential``); nothing is relayed. The credential is looked up at every AUTH and again in the
transaction that stores each message, never cached, so a revoked one fails at once.

AUTH is offered over TLS only (STARTTLS, or the implicit-TLS port) unless
``SMTP_AUTH_ALLOW_PLAINTEXT`` (embedded mode's default). Wrong credentials get ``535 5.7.8``.
Failures are counted per client IP and per username (the name as typed, lower case) for
``SMTP_AUTH_FAILURE_WINDOW`` seconds from the first; once either count reaches
``SMTP_AUTH_FAILURE_LIMIT``, AUTH answers ``454 4.7.0`` without looking at the credentials until
that window ends, right ones included (so guessing cannot go on by other means). A success
resets nothing: an attacker with a credential of their own could otherwise clear their IP's
count between guesses. The counters live where the fault counters do (``mail.smtpd.faults``):
Redis when ``REDIS_URL`` is set, shared by every smtpd, else this process's memory.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass

from django.conf import settings

from mail.smtpd.faults import MemoryState, RedisState

KEY_PREFIX = "pgh:smtpauth:"
AUTH_OK = "235 2.7.0 Authentication successful"
AUTH_INVALID = "535 5.7.8 Authentication credentials invalid"
AUTH_LIMITED = "454 4.7.0 Too many failed authentication attempts, try again later"
AUTH_NEEDS_TLS = "538 5.7.11 Encryption required for requested authentication mechanism"
AUTH_UNAVAILABLE = "454 4.7.0 Temporary authentication failure"
MECHANISMS = ("LOGIN", "PLAIN")


@dataclass(frozen=True)
class Sandbox:
    """What an authenticated session keeps of its credential (``session.auth_data``): ids and
    the inbox's fault rules as of AUTH, never the secret."""

    credential_id: str
    username: str
    inbox_id: str
    smtp_faults: list
    expires_at: float | None  # the inbox's expiry (a timestamp), None for a permanent one

    def inbox_expired(self) -> bool:
        return self.expires_at is not None and self.expires_at <= time.time()


class _MemoryCounts(MemoryState):
    async def incr(self, key: str, ttl: int) -> int:
        """As Redis counts (``EXPIRE NX``): the window runs from the first failure."""
        now = time.monotonic()
        until, value = self.counters.get(key, (0.0, 0))
        if until < now:
            self._bound(self.counters)
            until, value = now + ttl, 0
        self.counters[key] = (until, value + 1)
        return value + 1

    async def count(self, key: str) -> int:
        until, value = self.counters.get(key, (0.0, 0))
        return value if until >= time.monotonic() else 0


class _RedisCounts(RedisState):
    async def count(self, key: str) -> int:
        value = await self.client.get(key)
        return int(value) if value is not None else 0


class AuthFailures:
    """Failed AUTHs per client IP and per username (one per receiver process; the counts are
    shared through Redis when there is one)."""

    def __init__(self) -> None:
        self._state: _MemoryCounts | _RedisCounts | None = None

    @property
    def state(self) -> _MemoryCounts | _RedisCounts:
        if self._state is None:  # made in the serving loop (a Redis client binds to it)
            url = getattr(settings, "REDIS_URL", "")
            self._state = _RedisCounts(url) if url else _MemoryCounts()
        return self._state

    @staticmethod
    def _keys(ip: str | None, username: str) -> list[str]:
        name = hashlib.sha256(username.strip().lower().encode()).hexdigest()[:32]
        return [f"{KEY_PREFIX}ip:{ip or '-'}", f"{KEY_PREFIX}user:{name}"]

    async def limited(self, ip: str | None, username: str) -> bool:
        """Whether this IP or this username has used up its failures for now."""
        limit = settings.SMTP_AUTH_FAILURE_LIMIT
        for key in self._keys(ip, username):
            if await self.state.count(key) >= limit:
                return True
        return False

    async def failed(self, ip: str | None, username: str) -> None:
        """Counts one failure against the IP and the username."""
        for key in self._keys(ip, username):
            await self.state.incr(key, settings.SMTP_AUTH_FAILURE_WINDOW)

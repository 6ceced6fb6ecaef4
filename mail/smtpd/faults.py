"""Faults on demand: the SMTP replies an inbox's ``smtp_faults`` rules inject.

An inbox's rules travel with the inbox the receiver admitted at RCPT (``AdmittedInboxes``
caches the whole row), so an inbox without rules costs one attribute test per RCPT and DATA.
A rule that fires answers in place of the normal reply, after its ``delay_ms`` (an
``asyncio.sleep``: other sessions go on); the fault is recorded by
:func:`mail.pipeline.note_injected_fault` (``injected_faults`` + 1, ``mail.rejected`` with
``injected: true``) before the reply is sent, so a client that has its answer can assert on it.

``first`` and ``greylist`` count attempts in a :class:`FaultState` shared by every smtpd process
of the instance: Redis when ``REDIS_URL`` is set (``INCR`` and ``SET NX EX``), else this process's
memory (embedded mode: one process). Counters are keyed by the inbox and the rule's content, so
editing a rule starts its counting again.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from django.conf import settings

KEY_PREFIX = "pgh:smtpfault:"
FIRST_TTL = 7 * 86_400  # a `first` counter is forgotten after a week without change
MAX_DELAY_MS = 30_000  # the API allows no more; a row edited by hand is bounded here too


@dataclass(frozen=True)
class Fault:
    """A fault that fired: the reply and how long to hold it back."""

    reply: str
    delay: float
    stage: str
    mode: str

    @property
    def code(self) -> int:
        return int(self.reply[:3])

    @property
    def reason(self) -> str:
        return self.reply.split(" ", 2)[2] if self.reply.count(" ") >= 2 else self.reply


class FaultState(Protocol):
    async def incr(self, key: str, ttl: int) -> int: ...

    async def first_in_window(self, key: str, window: int) -> bool: ...


class MemoryState:
    """Counting in this process (embedded mode)."""

    def __init__(self, size: int = 100_000) -> None:
        self.size = size
        self.counters: dict[str, tuple[float, int]] = {}
        self.seen: dict[str, float] = {}

    def _bound(self, table: dict) -> None:
        if len(table) >= self.size:
            now = time.monotonic()
            for key in [k for k, v in table.items() if (v[0] if isinstance(v, tuple) else v) < now]:
                del table[key]
            if len(table) >= self.size:
                table.clear()

    async def incr(self, key: str, ttl: int) -> int:
        now = time.monotonic()
        until, value = self.counters.get(key, (0.0, 0))
        if until < now:
            value = 0
        self._bound(self.counters)
        self.counters[key] = (now + ttl, value + 1)
        return value + 1

    async def first_in_window(self, key: str, window: int) -> bool:
        now = time.monotonic()
        if self.seen.get(key, 0.0) > now:
            return False
        self._bound(self.seen)
        self.seen[key] = now + window
        return True


class RedisState:
    """Counting shared by every smtpd process (``REDIS_URL``)."""

    def __init__(self, url: str) -> None:
        import redis.asyncio

        self.client = redis.asyncio.Redis.from_url(url)

    async def incr(self, key: str, ttl: int) -> int:
        async with self.client.pipeline(transaction=True) as pipe:
            pipe.incr(key)
            pipe.expire(key, ttl, nx=True)
            value, _ = await pipe.execute()
        return int(value)

    async def first_in_window(self, key: str, window: int) -> bool:
        return bool(await self.client.set(key, b"1", nx=True, ex=window))


def state_for_settings() -> FaultState:
    url = getattr(settings, "REDIS_URL", "")
    return RedisState(url) if url else MemoryState()


def _rule_key(inbox_id: str, rule: dict[str, Any]) -> str:
    digest = hashlib.sha256(json.dumps(rule, sort_keys=True).encode()).hexdigest()[:16]
    return f"{KEY_PREFIX}{inbox_id}:{digest}"


class Faults:
    """Decides, per inbox and stage, whether a rule fires (one per receiver process)."""

    def __init__(self, state: FaultState | None = None) -> None:
        self._state = state

    @property
    def state(self) -> FaultState:
        if self._state is None:  # made in the serving loop (a Redis client binds to it)
            self._state = state_for_settings()
        return self._state

    async def check(
        self, inbox_id: str, rules: Sequence[dict[str, Any]], stage: str, sender: str, rcpt: str
    ) -> Fault | None:
        """The first rule of ``stage`` that fires for this attempt, or None."""
        for rule in rules:
            if rule.get("stage") != stage:
                continue
            if await self._fires(inbox_id, rule, sender, rcpt):
                delay = min(max(int(rule.get("delay_ms") or 0), 0), MAX_DELAY_MS) / 1000
                return Fault(str(rule["reply"]), delay, stage, str(rule.get("mode", "always")))
        return None

    async def _fires(self, inbox_id: str, rule: dict[str, Any], sender: str, rcpt: str) -> bool:
        mode = rule.get("mode", "always")
        if mode == "always":
            return True
        if mode == "probability":
            return random.random() < float(rule.get("probability", 0))
        if mode == "first":
            count = int(rule.get("count", 1))
            return await self.state.incr(_rule_key(inbox_id, rule), FIRST_TTL) <= count
        if mode == "greylist":
            pair = hashlib.sha256(f"{sender.lower()}\0{rcpt.lower()}".encode()).hexdigest()[:24]
            key = f"{_rule_key(inbox_id, rule)}:{pair}"
            return await self.state.first_in_window(key, int(rule.get("window_seconds", 300)))
        return False


def data_hold(faults: Sequence[Fault]) -> float:
    """How long a message's DATA reply is held back when ``faults`` fired (one per recipient
    inbox): the longest of their delays, once, so it never exceeds ``MAX_DELAY_MS``."""
    return max((fault.delay for fault in faults), default=0.0)


async def hold(delay: float) -> None:
    """Waits ``delay`` seconds (a fault's) without holding up other sessions."""
    if delay > 0:
        await asyncio.sleep(delay)

"""Per-process cache of authenticated keys, checked against the credentials epoch on every
request, so that a revoked (or changed) key takes effect on the next request in every web
process.

A bearer key's row and its workspace's row are read from PostgreSQL once and kept here, by the
key's SHA-256 digest (never the plain key), with the credentials epoch (``apikeys.epoch``) read
*before* the rows. A later request with the same key reads the epoch from Redis again — in the
same round trip as the rate limiter's counter when the caller counts the request
(``config.roundtrip``), so the check costs no round trip of its own — and uses the
cached rows only when the epoch has not moved since; any write to any key or workspace moves
it, and the rows are read again. Expiry is checked on every request against the cached
``expires_at``. Each request gets model instances of its own (``from_db``), never shared ones.

Without Redis (embedded mode) there is no epoch to check and nothing is cached.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS
from django.utils import timezone

from apikeys import epoch, selectors, tokens
from apikeys.exceptions import InvalidKey, KeyExpired
from apikeys.models import ApiKey, Workspace
from apikeys.throttling import WINDOW_SECONDS, _redis, rate_key, wait_after
from config.roundtrip import round_trip

MAX_ENTRIES = 10_000  # distinct keys cached per process; beyond it the cache starts over

_KEY_FIELDS = [f.attname for f in ApiKey._meta.concrete_fields]
_WORKSPACE_FIELDS = [f.attname for f in Workspace._meta.concrete_fields]
_LAST_USED = _KEY_FIELDS.index("last_used_at")


@dataclass
class _Entry:
    key: list[Any]  # ApiKey's concrete fields, in _KEY_FIELDS order
    workspace: tuple[Any, ...]
    epoch: bytes | None


_entries: dict[str, _Entry] = {}
_lock = threading.Lock()


@dataclass(frozen=True)
class Found:
    """A key that authenticates, and the rate limiter's answer when the lookup counted the
    request (``counted``): None when allowed, else the seconds until the window ends."""

    key: ApiKey
    counted: bool
    wait: float | None


def _instances(entry: _Entry) -> ApiKey:
    workspace = Workspace.from_db(DEFAULT_DB_ALIAS, _WORKSPACE_FIELDS, entry.workspace)
    key = ApiKey.from_db(DEFAULT_DB_ALIAS, _KEY_FIELDS, list(entry.key))
    ApiKey.workspace.field.set_cached_value(key, workspace)
    return key


def lookup(plain: str, *, count: bool = False) -> Found:
    """The active key behind ``plain`` (``unauthorized`` errors as ``selectors.api_key_for_plain``
    raises them); with ``count``, the request is counted against the key's rate in the same
    Redis round trip that checks the epoch."""
    client = _redis()
    if client is None:
        return Found(selectors.api_key_for_plain(plain), False, None)
    if not tokens.is_well_formed(plain):
        raise InvalidKey()
    digest = tokens.digest(plain)
    entry = _entries.get(digest)
    wait: float | None = None
    counted = False
    if entry is not None and count:
        now = time.time()
        name = rate_key(f"key:{entry.key[0]}", now)
        hits, _, current = round_trip(
            client, ("INCR", name), ("EXPIRE", name, WINDOW_SECONDS + 5, "NX"), ("GET", epoch.KEY)
        )
        wait, counted = wait_after(int(hits), settings.RATE_LIMIT_PER_MINUTE, now), True
    else:
        current = client.get(epoch.KEY)
    if entry is not None and entry.epoch == current:
        key = _instances(entry)
        epoch.remember(key.workspace, current or b"0")
        if key.expires_at is not None and key.expires_at <= timezone.now():
            raise KeyExpired()
        return Found(key, counted, wait)
    key = selectors.api_key_for_plain(plain)
    epoch.remember(key.workspace, current or b"0")  # never bumped yet: a value all the same
    with _lock:
        if len(_entries) >= MAX_ENTRIES:
            _entries.clear()
        _entries[digest] = _Entry(
            key=[getattr(key, name) for name in _KEY_FIELDS],
            workspace=tuple(getattr(key.workspace, name) for name in _WORKSPACE_FIELDS),
            epoch=current,
        )
    # Counted under the cached id: the same key's counter (the id does not change).
    return Found(key, counted and entry is not None and entry.key[0] == key.pk, wait)


def touched(key: ApiKey) -> None:
    """Remembers the ``last_used_at`` that ``api_key_touch`` just wrote (so that the cached row
    does not make it write again on every request)."""
    entry = _entries.get(key.digest)
    if entry is not None and entry.key[0] == key.pk:
        entry.key[_LAST_USED] = key.last_used_at


def clear() -> None:
    """Forgets every cached key of this process."""
    with _lock:
        _entries.clear()

"""Prefixed, time-ordered random ids (``inb_01jc…``).

The first ten characters after the prefix encode the creation time in milliseconds (Crockford
base32), the last sixteen are random, so ids sort by creation time: lists order by id and cursors
are simply the last id seen. Within a process ids are strictly increasing (ULID's monotonic
mode): an id made in the same millisecond as the previous one takes the previous random part
plus a random step, so the mail of one batch, stored in one millisecond, keeps its order.
"""

from __future__ import annotations

import secrets
import threading
import time

_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"

PREFIXES = frozenset(
    {"ws", "key", "dom", "inb", "eml", "att", "out", "whk", "dlv", "evt", "lbl", "lex", "aud"}
)


def _encode(value: int, length: int) -> str:
    chars = []
    for _ in range(length):
        value, rem = divmod(value, 32)
        chars.append(_ALPHABET[rem])
    return "".join(reversed(chars))


_RANDOM_BITS = 80
_lock = threading.Lock()
_last = (0, 0)  # (milliseconds, random part) of the newest id of this process


def _monotonic() -> tuple[int, int]:
    global _last
    with _lock:
        ms, rand = int(time.time() * 1000), secrets.randbits(_RANDOM_BITS)
        last_ms, last_rand = _last
        if ms <= last_ms:  # same millisecond (or the clock stepped back): count on from the last
            ms, rand = last_ms, last_rand + 1 + secrets.randbits(32)
            if rand >= 1 << _RANDOM_BITS:
                ms, rand = ms + 1, secrets.randbits(_RANDOM_BITS - 1)
        _last = (ms, rand)
        return ms, rand


def new_id(prefix: str, *, at_ms: int | None = None) -> str:
    """A new id with the given prefix; ``at_ms`` fixes the time part (bulk loaders, tests)."""
    if at_ms is None:
        ms, rand = _monotonic()
    else:
        ms, rand = at_ms, secrets.randbits(_RANDOM_BITS)
    return f"{prefix}_{_encode(ms, 10)}{_encode(rand, 16)}"


def looks_like(prefix: str, value: str) -> bool:
    """Whether ``value`` has the shape of an id with ``prefix`` (a pre-check, not a lookup)."""
    body = value[len(prefix) + 1 :]
    return value.startswith(prefix + "_") and len(body) == 26 and all(c in _ALPHABET for c in body)

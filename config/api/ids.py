"""Prefixed, time-ordered random ids (``inb_01jc…``).

The first ten characters after the prefix encode the creation time in milliseconds (Crockford
base32), the last sixteen are random, so ids sort by creation time: lists order by id and cursors
are simply the last id seen.
"""

from __future__ import annotations

import secrets
import time

_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"

PREFIXES = frozenset({"ws", "key", "dom", "inb", "eml", "att", "out", "whk", "dlv", "evt", "lbl"})


def _encode(value: int, length: int) -> str:
    chars = []
    for _ in range(length):
        value, rem = divmod(value, 32)
        chars.append(_ALPHABET[rem])
    return "".join(reversed(chars))


def new_id(prefix: str, *, at_ms: int | None = None) -> str:
    """A new id with the given prefix; ``at_ms`` fixes the time part (bulk loaders, tests)."""
    ms = int(time.time() * 1000) if at_ms is None else at_ms
    return f"{prefix}_{_encode(ms, 10)}{_encode(secrets.randbits(80), 16)}"


def looks_like(prefix: str, value: str) -> bool:
    """Whether ``value`` has the shape of an id with ``prefix`` (a pre-check, not a lookup)."""
    body = value[len(prefix) + 1 :]
    return value.startswith(prefix + "_") and len(body) == 26 and all(c in _ALPHABET for c in body)

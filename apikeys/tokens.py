"""The plain secret format: a prefix (``pgh_`` for API keys, ``pgi_`` for invitations) + 34
random base62 characters + a 6-character checksum.

The checksum (CRC32 of the random part, base62) lets secret scanners and our own authentication
reject a mistyped or made-up key without a database lookup. Only a SHA-256 digest is stored; the
first 12 characters (``pgh_`` + 8) are kept in clear as the lookup prefix and display hint.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import string
import zlib

PREFIX = "pgh_"
INVITATION_PREFIX = "pgi_"
_BASE62 = string.digits + string.ascii_uppercase + string.ascii_lowercase
_RANDOM_LEN = 34
_CHECK_LEN = 6
LOOKUP_LEN = len(PREFIX) + 8


def _base62(value: int, length: int) -> str:
    out = []
    for _ in range(length):
        value, rem = divmod(value, 62)
        out.append(_BASE62[rem])
    return "".join(reversed(out))


def _checksum(body: str) -> str:
    return _base62(zlib.crc32(body.encode()), _CHECK_LEN)


def generate(prefix: str = PREFIX) -> str:
    """A new plain secret (an API key unless another prefix is given)."""
    body = "".join(secrets.choice(_BASE62) for _ in range(_RANDOM_LEN))
    return prefix + body + _checksum(body)


def is_well_formed(plain: str, prefix: str = PREFIX) -> bool:
    """Shape and checksum check, no database involved."""
    if len(plain) != len(prefix) + _RANDOM_LEN + _CHECK_LEN or not plain.startswith(prefix):
        return False
    rest = plain[len(prefix) :]
    if any(c not in _BASE62 for c in rest):
        return False
    body, check = rest[:_RANDOM_LEN], rest[_RANDOM_LEN:]
    return hmac.compare_digest(_checksum(body), check)


def digest(plain: str) -> str:
    return hashlib.sha256(plain.encode()).hexdigest()


def lookup_prefix(plain: str) -> str:
    return plain[:LOOKUP_LEN]

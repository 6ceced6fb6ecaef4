"""The credentials epoch: a counter in Redis that every change to a key or a workspace bumps, so
that every web process drops what it cached of them (``apikeys.keycache``) before its next
request.

Bumped by the querysets' ``update`` and by ``post_save``/``post_delete`` of ``ApiKey`` and
``Workspace`` (``apikeys.models``), i.e. by every write through the ORM, whoever makes it:
services, the Django admin, management commands. Only ``last_used_at`` (written once a minute per
key in use) does not bump it. The bump happens at once and again when the transaction commits:
at once, so that a request served inside the same transaction (a test's) sees the change; after
the commit, so that a process that re-read the old row between the first bump and the commit
reads it again. Without Redis (embedded mode) nothing is cached and nothing is bumped.
"""

from __future__ import annotations

from django.db import transaction

KEY = "pgh:credentials:epoch"
QUIET_FIELDS = frozenset({"last_used_at"})


def bump() -> None:
    """Invalidates every web process's cache of keys and workspaces (see the module docstring)."""
    from apikeys.throttling import _redis

    client = _redis()
    if client is None:
        return
    client.incr(KEY)
    transaction.on_commit(lambda: client.incr(KEY))


def bump_unless_quiet(fields: object) -> None:
    """:func:`bump` unless ``fields`` (names written) are all :data:`QUIET_FIELDS`."""
    if fields is None or not set(fields) <= QUIET_FIELDS:  # type: ignore[call-overload]
        bump()

"""The credentials epoch: a counter in Redis that every change to a key, a workspace or a
workspace's custom domain bumps, so that every web process drops what it cached of them
(``apikeys.keycache``, ``inboxes.selectors.domain_list``) before its next request.

Bumped by the querysets' ``update`` and by ``post_save``/``post_delete`` of ``ApiKey`` and
``Workspace`` (``apikeys.models``), i.e. by every write through the ORM, whoever makes it:
services, the Django admin, management commands. Only ``last_used_at`` (written once a minute per
key in use) does not bump it. The bump happens at once and again when the transaction commits:
at once, so that a request served inside the same transaction (a test's) sees the change; after
the commit, so that a process that re-read the old row between the first bump and the commit
reads it again. Without Redis (embedded mode) nothing is cached and nothing is bumped.

Each commit that bumps the epoch also wakes the group :data:`GROUP` on the channel layer: every
web process's key watch (``apikeys.watch``) listens on it and checks its watched keys at once, so
an open wait or stream ends within a query of a revocation's commit instead of at the watch's
next periodic check (which stays, for a lost wake-up and for expiry). Embedded mode too.

The epoch a request's authentication read (before it read the key's rows) travels on the
request's own workspace instance (:func:`remember`, :func:`seen`): a per-workspace cache keyed on
it (custom domains) is as fresh as the key itself, at no round trip of its own. A workspace read
any other way (a dashboard session, a worker) carries none, and such caches are not used.
"""

from __future__ import annotations

import logging

from django.db import transaction

from events import wake

logger = logging.getLogger(__name__)

KEY = "pgh:credentials:epoch"
GROUP = "credentials"  # the channel-layer group of the key watches (apikeys.watch)
_SEEN = "_credentials_epoch"  # the attribute on a request's Workspace instance
QUIET_FIELDS = frozenset({"last_used_at"})


def bump() -> None:
    """Invalidates every web process's cache of keys and workspaces (see the module docstring)."""
    from apikeys.throttling import _redis

    client = _redis()
    if client is not None:
        client.incr(KEY)
    connection = transaction.get_connection()
    if any(getattr(fn, "_credentials", False) for _, fn, _ in connection.run_on_commit):
        return  # this transaction bumps and wakes once more when it commits (e.g. a cascade)

    def committed() -> None:
        if client is not None:
            client.incr(KEY)
        try:
            wake.send([(GROUP, {"type": "credentials.changed", "group": GROUP})])
        except Exception:  # the watches' periodic check still sees the change
            logger.exception("could not wake the key watches")

    committed._credentials = True  # type: ignore[attr-defined]
    transaction.on_commit(committed)


def bump_unless_quiet(fields: object) -> None:
    """:func:`bump` unless ``fields`` (names written) are all :data:`QUIET_FIELDS`."""
    if fields is None or not set(fields) <= QUIET_FIELDS:  # type: ignore[call-overload]
        bump()


def remember(workspace: object, value: bytes | None) -> None:
    """Records on ``workspace`` (this request's own instance) the epoch read before its rows."""
    setattr(workspace, _SEEN, value)


def seen(workspace: object) -> bytes | None:
    """The epoch read before ``workspace``'s row was, or None (not through the key cache)."""
    return getattr(workspace, _SEEN, None)

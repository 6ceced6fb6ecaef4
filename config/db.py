"""Connection hygiene for the thread-pool calls that serve async code (wait, stream, smtpd).

Such calls run on pooled threads whose connections outlive any request, so nothing of Django's
request cycle closes broken or expired ones; :func:`release_connections` does it after each call.
The health-check flag of a connection is Django's internal (:mod:`config.django_adapter`).
"""

from __future__ import annotations

import time

from config.django_adapter import health_checked, mark_health_checked

HEALTH_CHECK_SECONDS = 10.0  # a pooled connection is pinged at most this often


def release_connections() -> None:
    """After a call: drop broken or expired connections, keep healthy ones without a ping.

    Django's ``close_old_connections`` also forgets that the connection was checked, so the next
    query would begin with a ``SELECT 1``; here that health check runs at most once per
    ``HEALTH_CHECK_SECONDS`` per connection.
    """
    from django.db import connections

    now = time.monotonic()
    for conn in connections.all(initialized_only=True):
        if conn.connection is None:
            continue
        checked = getattr(conn, "_pgh_checked_at", 0.0)
        done = health_checked(conn)
        conn.close_if_unusable_or_obsolete()
        if conn.connection is not None and done and now - checked < HEALTH_CHECK_SECONDS:
            mark_health_checked(conn)  # checked recently: trust it for the next call
        elif conn.connection is not None:
            conn._pgh_checked_at = now

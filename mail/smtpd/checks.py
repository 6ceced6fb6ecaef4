"""The SMTP server's authentication checks: SPF, DKIM, DMARC and ARC of each message
(``mail.authentication.check``) in a thread pool of the smtpd's process, from the end of DATA
until the message joins its batch.

The pool's threads mostly wait on DNS, so the event loop and the digest of the message
(``pipeline.digested``) go on meanwhile. A message of up to ``INLINE_BYTES`` whose lookups are
all answered from the cache is checked at once on the event loop instead, as its digest is (no
lookup waits; the thread's hand-over is saved): it is tried that way first, and a lookup that is
not cached stops it (``NotCached``) and sends it to the pool.

Every message gets at most ``MAIL_AUTH_BUDGET`` seconds from its end of DATA, its lookups
included: a thread that starts late has that much less, and if the verdict is not back by then
plus a moment the session stops waiting and stores ``temperror`` for every mechanism (the
thread ends on its own: its lookups are bounded by the same deadline).
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from django.conf import settings

from mail import authentication
from mail.pipeline import Incoming

logger = logging.getLogger(__name__)

THREADS = 16  # concurrent checks per smtpd process (each mostly waits on DNS, if at all)
GRACE = 0.5  # seconds past the budget before a session stops waiting for its verdict
# A message up to this size whose every lookup is answered from the cache is checked on the
# event loop (as the digest is, and within the same bound: DIGEST_IN_SESSION_BYTES).
INLINE_BYTES = 128 * 1024


def peer_ip(session: Any) -> str:
    """The client's address as the session saw it (``""`` if unknown); an IPv4 client of a
    dual-stack socket (``::ffff:192.0.2.1``) as its IPv4 address, which SPF records name."""
    peer = getattr(session, "peer", None)
    if not (isinstance(peer, tuple) and peer):
        return ""
    text = str(peer[0]).split("%", 1)[0]
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return text
    mapped = getattr(address, "ipv4_mapped", None)
    return str(mapped or address)


def _check(incoming: Incoming, deadline: float, *, cached_only: bool = False) -> dict:
    return authentication.check(
        incoming.raw,
        client_ip=incoming.client_ip,
        helo=incoming.helo,
        mail_from=incoming.mail_from,
        budget=deadline - time.monotonic(),
        max_bytes=settings.MAIL_AUTH_MAX_BYTES,
        cached_only=cached_only,
    )


class AuthenticationChecks:
    """Runs the checks of the process's sessions (``MAIL_AUTH_CHECKS`` off: none)."""

    def __init__(self) -> None:
        self._pool: ThreadPoolExecutor | None = None

    def start(self, incoming: Incoming) -> asyncio.Future[dict] | None:
        """The verdict of ``incoming``, to await; None when the checks are off."""
        if not settings.MAIL_AUTH_CHECKS:
            return None
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=THREADS, thread_name_prefix="mail-auth")
        budget = settings.MAIL_AUTH_BUDGET
        deadline = time.monotonic() + budget
        loop = asyncio.get_running_loop()
        if len(incoming.raw) <= INLINE_BYTES:
            # Every answer it needs kept already (the common case: a sender seen within its
            # records' TTL): checked here, without a thread's hand-over of the interpreter.
            # (Imported here: dnspython is loaded at the first message, not at start-up.)
            from mail.authentication.resolver import NotCached

            try:
                done = loop.create_future()
                done.set_result(_check(incoming, deadline, cached_only=True))
                return done
            except NotCached:
                pass
        running = loop.run_in_executor(self._pool, _check, incoming, deadline)
        return asyncio.ensure_future(self._bounded(running, incoming, budget))

    @staticmethod
    async def _bounded(running: asyncio.Future[dict], incoming: Incoming, budget: float) -> dict:
        try:
            return await asyncio.wait_for(asyncio.shield(running), budget + GRACE)
        except TimeoutError:
            reason = "time budget spent"
        except Exception:
            logger.exception("authentication checks failed")
            reason = "checks failed"
        return authentication.unanswered(
            reason, client_ip=incoming.client_ip, helo=incoming.helo, mail_from=incoming.mail_from
        )

"""The SMTP front door (aiosmtpd): rejects cheaply, lets the pipeline decide.

- RCPT: unknown or expired inboxes are refused here (``550 5.1.1``), more than
  ``MAX_RECIPIENTS`` recipients get ``452 4.5.3``.
- DATA: the message joins the process's :class:`GroupCommit`: the messages of concurrent
  sessions are stored together, one transaction per batch (``pipeline.receive_many``) in a
  worker thread, and each session gets its ``250`` only after its batch committed. If every
  recipient refused, the first refusal is the reply (``550 5.7.1`` sender filtered, ``552
  5.2.2`` inbox full); a failure of ours is ``451 4.3.0`` so the client retries, never a
  ``250``. The ``SIZE`` extension is advertised; a larger message gets ``552 5.3.4``.
- RCPT: an inbox admitted moments ago is admitted again from memory (:class:`AdmittedInboxes`);
  a refusal is never cached, and DATA re-reads and locks every inbox before storing.
- The listening socket uses ``SO_REUSEPORT`` so several ``smtpd`` processes can share one port.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from typing import Any

from aiosmtpd.smtp import SMTP, Envelope, Session
from asgiref.sync import sync_to_async
from django.conf import settings

from config.db import release_connections
from inboxes.models import Inbox
from mail import pipeline

logger = logging.getLogger(__name__)

MAX_RECIPIENTS = 100


def _in_thread(fn: Any, *args: Any, **kwargs: Any) -> Any:
    """Runs database work, leaving the pooled thread's connection healthy or closed."""
    try:
        return fn(*args, **kwargs)
    finally:
        release_connections()


async def _run(fn: Any, *args: Any, **kwargs: Any) -> Any:
    return await sync_to_async(_in_thread, thread_sensitive=False)(fn, *args, **kwargs)


class GroupCommit:
    """Stores the messages of concurrent SMTP sessions together (group commit).

    Each DATA hands its message over and waits. While one batch is being written, the next one
    fills; when the write ends, everything waiting goes in the next batch. A busy receiver thus
    commits many messages per transaction and an idle one commits each message at once: no
    timer, no added latency. If a batch fails, its messages are stored one by one, so a message
    that cannot be stored costs only its own sender a ``451``.
    """

    def __init__(self, max_messages: int = 64, max_bytes: int = 16 * 1024 * 1024) -> None:
        self.max_messages, self.max_bytes = max_messages, max_bytes
        self.waiting: list[tuple[pipeline.Incoming, asyncio.Future[list[pipeline.Delivery]]]] = []
        self.writer: asyncio.Task[None] | None = None

    async def store(self, incoming: pipeline.Incoming) -> list[pipeline.Delivery]:
        future: asyncio.Future[list[pipeline.Delivery]] = asyncio.get_running_loop().create_future()
        self.waiting.append((incoming, future))
        if self.writer is None or self.writer.done():
            self.writer = asyncio.create_task(self._write())
        return await future

    def _take(self) -> list[tuple[pipeline.Incoming, asyncio.Future[list[pipeline.Delivery]]]]:
        size, count = 0, 0
        for incoming, _ in self.waiting:
            if count and (count >= self.max_messages or size + len(incoming.raw) > self.max_bytes):
                break
            size, count = size + len(incoming.raw), count + 1
        batch, self.waiting = self.waiting[:count], self.waiting[count:]
        return batch

    async def _write(self) -> None:
        while self.waiting:
            batch = self._take()
            messages = [incoming for incoming, _ in batch]
            outcomes: list[list[pipeline.Delivery] | BaseException]
            try:
                outcomes = list(await _run(pipeline.receive_many, messages))
            except Exception as exc:
                if len(batch) == 1:
                    outcomes = [exc]
                else:
                    logger.warning("a batch of %d failed; storing them one by one", len(batch))
                    outcomes = [await self._alone(incoming) for incoming in messages]
            for (_, future), outcome in zip(batch, outcomes, strict=True):
                if future.done():  # the session went away (it was cancelled while waiting)
                    continue
                if isinstance(outcome, BaseException):
                    future.set_exception(outcome)
                else:
                    future.set_result(outcome)

    @staticmethod
    async def _alone(incoming: pipeline.Incoming) -> list[pipeline.Delivery] | BaseException:
        try:
            return (await _run(pipeline.receive_many, [incoming]))[0]
        except Exception as exc:
            return exc


class AdmittedInboxes:
    """Inboxes admitted at RCPT in the last ``ttl`` seconds, by recipient address.

    A test or an agent sends a burst of mail to one inbox; the second RCPT of the burst needs
    no query. Only admissions are remembered: an unknown address is looked up every time (an
    inbox created a moment ago is found at once), and an inbox whose expiry has passed is
    looked up again. DATA locks and re-reads every inbox before storing, so an inbox deleted
    or shortened meanwhile is refused there.
    """

    def __init__(self, ttl: float = 10.0, size: int = 10_000) -> None:
        self.ttl, self.size = ttl, size
        self.entries: dict[str, tuple[float, Inbox]] = {}

    def get(self, address: str) -> Inbox | None:
        entry = self.entries.get(address.lower())
        if entry is None:
            return None
        stored, inbox = entry
        if time.monotonic() - stored > self.ttl or inbox.is_expired():
            del self.entries[address.lower()]
            return None
        return inbox

    def put(self, address: str, inbox: Inbox) -> None:
        if len(self.entries) >= self.size:
            self.entries.clear()
        self.entries[address.lower()] = (time.monotonic(), inbox)


class Handler:
    """aiosmtpd handler hooks; one per process (its group commit and admissions are shared)."""

    def __init__(self) -> None:
        self.group_commit = GroupCommit()
        self.admitted = AdmittedInboxes()

    async def handle_RCPT(
        self, server: SMTP, session: Session, envelope: Envelope, address: str, options: list[str]
    ) -> str:
        if len(envelope.rcpt_tos) >= MAX_RECIPIENTS:
            return "452 4.5.3 Too many recipients"
        inbox = self.admitted.get(address)
        if inbox is None:
            try:
                refusal, inbox = await _run(
                    pipeline.admit_recipient, address, envelope.mail_from or ""
                )
            except Exception:
                logger.exception("RCPT check failed for %s", address)
                return "451 4.3.0 Temporary failure, try again later"
            if refusal is not None:
                return refusal.smtp_reply
            if inbox is not None:
                self.admitted.put(address, inbox)
        envelope.rcpt_tos.append(address)
        envelope.rcpt_options.extend(options)
        if inbox is not None:  # DATA reuses it rather than looking the address up again
            admitted = getattr(envelope, "admitted", None)
            if admitted is None:
                admitted = envelope.admitted = {}
            admitted[address] = inbox
        return "250 2.1.5 OK"

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        incoming = pipeline.Incoming(
            raw=envelope.original_content or b"",
            mail_from=envelope.mail_from or "",
            rcpt_tos=list(envelope.rcpt_tos),
            admitted=getattr(envelope, "admitted", None),
        )
        try:
            deliveries = await self.group_commit.store(incoming)
        except Exception:
            logger.exception("receive failed; answering 451 so the sender retries")
            return "451 4.3.0 Temporary failure, try again later"
        stored = [d for d in deliveries if d.email_id]
        if stored:
            return f"250 2.0.0 OK {stored[0].email_id}"
        refusal = next((d.refusal for d in deliveries if d.refusal), pipeline.NO_SUCH_INBOX)
        return refusal.smtp_reply


_ATEXT = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+"
_SIMPLE_PATH_RE = re.compile(
    rf"<({_ATEXT}(?:\.{_ATEXT})*@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*)>(?:[ \t]+(?=[^ \t(])|\Z)"
)


class PigeonholeSMTP(SMTP):
    """aiosmtpd's server with our reply for oversized messages (and its event)."""

    line_length_limit = 65_536  # real mail breaks RFC 5321's 1,000; still bounded

    def _getaddr(self, arg: str) -> tuple[str | None, str | None]:
        """``<local@domain> params`` with a dot-atom local part and a plain domain (nearly every
        MAIL and RCPT) without the email package's header parser, which cost ~7 % of the
        receiver's CPU; anything else (quoted local parts, routes, comments) goes to it. A path
        that makes the parser itself fail (``<@`` raises IndexError inside CPython 3.11's email
        package) is a malformed address (553), not a 500 with a traceback in the log."""
        simple = _SIMPLE_PATH_RE.match(arg)
        if simple is None:
            try:
                return super()._getaddr(arg)
            except Exception:
                return None, None
        address = simple.group(1)
        if self.local_part_limit and address.index("@") > self.local_part_limit:
            return None, None
        return address, arg[simple.end() :]

    async def push(self, status: str) -> None:
        if status.startswith("552 Error:"):
            envelope = self.envelope
            if envelope is not None and envelope.rcpt_tos:
                rcpts, sender = list(envelope.rcpt_tos), envelope.mail_from or ""
                try:
                    await _run(pipeline.note_oversized, rcpts, sender)
                except Exception:
                    logger.exception("could not record oversized message")
            status = pipeline.TOO_LARGE.smtp_reply
        await super().push(status)


def make_protocol(handler: Handler) -> PigeonholeSMTP:
    return PigeonholeSMTP(
        handler,
        data_size_limit=settings.MAX_MESSAGE_BYTES,
        enable_SMTPUTF8=True,
        decode_data=False,
        hostname=settings.SMTP_HOSTNAME,
        ident="Pigeonhole ESMTP",
        timeout=300,
    )


async def start_server(host: str, port: int) -> asyncio.Server:
    """Listens on ``host:port`` (SO_REUSEPORT) in the running event loop."""
    loop = asyncio.get_running_loop()
    handler = Handler()
    return await loop.create_server(
        lambda: make_protocol(handler), host=host, port=port, reuse_port=True
    )

"""The SMTP front door (aiosmtpd): rejects cheaply, lets the pipeline decide.

- RCPT: unknown or expired inboxes are refused here (``550 5.1.1``), more than
  ``MAX_RECIPIENTS`` recipients get ``452 4.5.3``.
- DATA: the pipeline runs in a worker thread; ``250`` is answered only after it committed. If
  every recipient refused, the first refusal is the reply (``550 5.7.1`` sender filtered,
  ``552 5.2.2`` inbox full); a failure of ours is ``451 4.3.0`` so the client retries, never a
  ``250``. The ``SIZE`` extension is advertised; a larger message gets ``552 5.3.4``.
- The listening socket uses ``SO_REUSEPORT`` so several ``smtpd`` processes can share one port.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from aiosmtpd.smtp import SMTP, Envelope, Session
from asgiref.sync import sync_to_async
from django.conf import settings

from config.db import release_connections
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


class Handler:
    """aiosmtpd handler hooks."""

    async def handle_RCPT(
        self, server: SMTP, session: Session, envelope: Envelope, address: str, options: list[str]
    ) -> str:
        if len(envelope.rcpt_tos) >= MAX_RECIPIENTS:
            return "452 4.5.3 Too many recipients"
        try:
            refusal, inbox = await _run(pipeline.admit_recipient, address, envelope.mail_from or "")
        except Exception:
            logger.exception("RCPT check failed for %s", address)
            return "451 4.3.0 Temporary failure, try again later"
        if refusal is not None:
            return refusal.smtp_reply
        envelope.rcpt_tos.append(address)
        envelope.rcpt_options.extend(options)
        if inbox is not None:  # DATA reuses it rather than looking the address up again
            admitted = getattr(envelope, "admitted", None)
            if admitted is None:
                admitted = envelope.admitted = {}
            admitted[address] = inbox
        return "250 2.1.5 OK"

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        raw = envelope.original_content or b""
        try:
            deliveries = await _run(
                pipeline.receive,
                raw,
                mail_from=envelope.mail_from or "",
                rcpt_tos=list(envelope.rcpt_tos),
                admitted=getattr(envelope, "admitted", None),
            )
        except Exception:
            logger.exception("receive failed; answering 451 so the sender retries")
            return "451 4.3.0 Temporary failure, try again later"
        stored = [d for d in deliveries if d.email_id]
        if stored:
            return f"250 2.0.0 OK {stored[0].email_id}"
        refusal = next((d.refusal for d in deliveries if d.refusal), pipeline.NO_SUCH_INBOX)
        return refusal.smtp_reply


class PigeonholeSMTP(SMTP):
    """aiosmtpd's server with our reply for oversized messages (and its event)."""

    line_length_limit = 65_536  # real mail breaks RFC 5321's 1,000; still bounded

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


def make_protocol() -> PigeonholeSMTP:
    return PigeonholeSMTP(
        Handler(),
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
    return await loop.create_server(make_protocol, host=host, port=port, reuse_port=True)

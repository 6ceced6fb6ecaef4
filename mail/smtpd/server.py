"""The SMTP front door (aiosmtpd): rejects cheaply, lets the pipeline decide.

- RCPT: unknown or expired inboxes are refused here (``550 5.1.1``), more than
  ``MAX_RECIPIENTS`` recipients get ``452 4.5.3``.
- DATA: the message is parsed and extracted (up to ``DIGEST_IN_SESSION_BYTES``, with a
  writer process) and joins the process's :class:`GroupCommit`: the messages of concurrent
  sessions are stored together, one transaction per batch (``pipeline.receive_many``) in the
  writer process (``mail.smtpd.writer``; a worker thread in embedded mode), and each session gets
  its ``250`` only after its batch committed. If every
  recipient refused, the first refusal is the reply (``550 5.7.1`` sender filtered, ``552
  5.2.2`` inbox full); a failure of ours is ``451 4.3.0`` so the client retries, never a
  ``250``. The ``SIZE`` extension is advertised; a larger message gets ``552 5.3.4``.
- RCPT: an inbox admitted moments ago is admitted again from memory (:class:`AdmittedInboxes`);
  a refusal is never cached, and DATA re-reads and locks every inbox before storing.
- Hostile clients: command lines over 1,024 bytes get ``500``, and are never buffered whole; DATA
  is read in blocks of 64 KB and nothing past ``MAX_MESSAGE_BYTES`` is kept; only ``CRLF . CRLF``
  ends DATA (no SMTP smuggling); CR, LF or NUL inside MAIL or RCPT gets ``501``; a session idle
  for ``SMTP_IDLE_TIMEOUT`` seconds is closed; a client IP with ``SMTP_MAX_CONNECTIONS_PER_IP``
  open sessions gets ``421`` for the next one.
- The listening socket uses ``SO_REUSEPORT`` so several ``smtpd`` processes can share one port.
- TLS (``mail.smtpd.tls``): with a context, STARTTLS is offered on the SMTP port, and a second
  port may take implicit TLS (``SMTPS_PORT``); a handshake that fails closes that connection only.
- Faults on demand (``mail.smtpd.faults``): an admitted inbox's ``smtp_faults`` rules may answer
  its RCPT or the DATA in place of the normal reply.
- Authentication verdicts (``mail.smtpd.checks``): SPF, DKIM, DMARC and ARC of each message run
  in a thread from the end of DATA, beside its digest, within ``MAIL_AUTH_BUDGET``; the verdict
  joins the batch with the message.
- SMTP AUTH with an inbox's sandbox credentials (``mail.smtpd.auth``): PLAIN and LOGIN, over TLS
  unless ``SMTP_AUTH_ALLOW_PLAINTEXT``; an authenticated session's RCPT admits any recipient and
  its message is stored once in the credential's inbox (``Incoming.credential``).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import dataclasses
import functools
import logging
import re
import ssl
import time
from collections import Counter
from typing import Any

from aiosmtpd.smtp import MISSING, SMTP, Envelope, Session, TLSSetupException, syntax
from asgiref.sync import sync_to_async
from django.conf import settings

from config.db import release_connections
from inboxes import services as inbox_services
from inboxes.models import Inbox
from mail import pipeline
from mail.smtpd.aiosmtpd_adapter import AdaptedSMTP, SessionTemplate
from mail.smtpd.auth import (
    AUTH_INVALID,
    AUTH_LIMITED,
    AUTH_NEEDS_TLS,
    AUTH_OK,
    AUTH_UNAVAILABLE,
    MECHANISMS,
    AuthFailures,
    Sandbox,
)
from mail.smtpd.checks import AuthenticationChecks, peer_ip
from mail.smtpd.faults import Fault, Faults, data_hold, hold
from mail.smtpd.writer import BatchWriter, ThreadWriter, WriterLost

logger = logging.getLogger(__name__)

MAX_RECIPIENTS = 100
# With a writer process (writer.py), messages up to this size are parsed and extracted by the
# smtpd as their DATA ends, so that the writer only stores and the two work on two batches at
# once (the gain is largest for large realistic mail). Larger ones are parsed by the writer: the
# event loop that every session shares would stall while each is parsed, and this size bounds how
# long the worst hostile message can hold it.
# A writer thread parses everything: it shares the event loop's interpreter (and GIL) anyway.
DIGEST_IN_SESSION_BYTES = 128 * 1024


def sandbox_login(username: str, password: str) -> Sandbox | None:
    """The session's :class:`Sandbox` for these AUTH credentials, else None (in a thread)."""
    credential = inbox_services.smtp_login(username=username, password=password)
    if credential is None:
        return None
    inbox = credential.inbox
    return Sandbox(
        credential_id=credential.pk,
        username=credential.username,
        inbox_id=inbox.pk,
        smtp_faults=list(inbox.smtp_faults or []),
        expires_at=inbox.expires_at.timestamp() if inbox.expires_at is not None else None,
    )


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
    that cannot be stored costs only its own sender a ``451``; if the writer process was lost
    with the batch (``mail.smtpd.writer``), the whole batch is answered ``451``: it is not known
    whether it was stored, and the senders retry.

    A writer that merges the requests of several smtpds itself (``writer.merges``: the host's
    shared writer) gets what waits at once, without waiting for the previous request's answer:
    it writes everything that reached it from every smtpd while its last batch was written, and
    an smtpd that held its next request back until its answer came would only ever be in every
    other batch, with half as many messages each time.
    """

    def __init__(
        self, writer: BatchWriter, max_messages: int = 64, max_bytes: int = 16 * 1024 * 1024
    ) -> None:
        self.writer = writer
        self.max_messages, self.max_bytes = max_messages, max_bytes
        self.waiting: list[tuple[pipeline.Incoming, asyncio.Future[list[pipeline.Receipt]]]] = []
        self.task: asyncio.Task[None] | None = None
        self.sending: set[asyncio.Task[None]] = set()  # requests in flight to a merging writer

    async def store(self, incoming: pipeline.Incoming) -> list[pipeline.Receipt]:
        future: asyncio.Future[list[pipeline.Receipt]] = asyncio.get_running_loop().create_future()
        self.waiting.append((incoming, future))
        if getattr(self.writer, "merges", False):
            if len(self.waiting) == 1:  # one request for what ends its DATA in this turn
                task = asyncio.create_task(self._write())
                self.sending.add(task)
                task.add_done_callback(self.sending.discard)
        elif self.task is None or self.task.done():
            self.task = asyncio.create_task(self._write())
        return await future

    def _take(self) -> list[tuple[pipeline.Incoming, asyncio.Future[list[pipeline.Receipt]]]]:
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
            outcomes: list[list[pipeline.Receipt] | BaseException]
            try:  # a writer may answer a message with its own error (mail.smtpd.shared)
                outcomes = list(await self.writer.store(messages))
            except WriterLost as exc:
                outcomes = [exc] * len(batch)
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

    async def _alone(self, incoming: pipeline.Incoming) -> list[pipeline.Receipt] | BaseException:
        try:
            return (await self.writer.store([incoming]))[0]
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

    def __init__(self, writer: BatchWriter) -> None:
        self.group_commit = GroupCommit(writer)
        self.digest_in_session = writer.digest_in_session  # see DIGEST_IN_SESSION_BYTES
        self.admitted = AdmittedInboxes()
        self.connections: Counter[str] = Counter()  # open sessions per client IP address
        self.protocol_state = SessionTemplate()  # every session after the first is set up from it
        self.implicit_tls_state = SessionTemplate()  # the same for sessions of the SMTPS port
        self.faults = Faults()
        self.checks = AuthenticationChecks()
        # Not auth_*: aiosmtpd takes every auth_* attribute of the handler for an AUTH mechanism.
        self.login_failures = AuthFailures()
        # Read once: the EHLO of every session of this handler offers AUTH alike.
        self.plaintext_login = bool(settings.SMTP_AUTH_ALLOW_PLAINTEXT)

    async def _inject(self, fault: Fault, inbox_id: str, mail_from: str) -> str:
        """Records an injected fault, waits its delay, and gives its reply."""
        await self._note(fault, inbox_id, mail_from)
        await hold(fault.delay)
        return fault.reply

    async def _note(self, fault: Fault, inbox_id: str, mail_from: str) -> None:
        """Records an injected fault (``injected_faults`` + 1, ``mail.rejected``)."""
        try:
            await _run(
                pipeline.note_injected_fault,
                inbox_id,
                mail_from,
                code=fault.code,
                reason=fault.reason,
                stage=fault.stage,
                mode=fault.mode,
            )
        except Exception:
            logger.exception("could not record an injected fault for %s", inbox_id)

    async def handle_RCPT(
        self, server: SMTP, session: Session, envelope: Envelope, address: str, options: list[str]
    ) -> str:
        if len(envelope.rcpt_tos) >= MAX_RECIPIENTS:
            return "452 4.5.3 Too many recipients"
        sandbox: Sandbox | None = session.auth_data
        inbox: Inbox | None = None
        if sandbox is not None:  # authenticated: any recipient, the credential's inbox
            if sandbox.inbox_expired():
                return pipeline.INBOX_EXPIRED.smtp_reply
            inbox_id, rules = sandbox.inbox_id, sandbox.smtp_faults
        else:
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
            inbox_id, rules = (inbox.pk, inbox.smtp_faults) if inbox is not None else ("", [])
        if rules:
            mail_from = envelope.mail_from or ""
            try:
                fault = await self.faults.check(inbox_id, rules, "rcpt", mail_from, address)
            except Exception:
                logger.exception("fault rules of %s could not be checked", inbox_id)
                fault = None
            if fault is not None:
                return await self._inject(fault, inbox_id, mail_from)
            if any(rule.get("stage") == "data" for rule in rules):
                faulty = getattr(envelope, "faulty", None)
                if faulty is None:
                    faulty = envelope.faulty = {}
                faulty[address] = (inbox_id, rules)
        envelope.rcpt_tos.append(address)
        envelope.rcpt_options.extend(options)
        if inbox is not None:  # DATA reuses it rather than looking the address up again
            admitted = getattr(envelope, "admitted", None)
            if admitted is None:
                admitted = envelope.admitted = {}
            admitted[address] = inbox.pk
        return "250 2.1.5 OK"

    async def _data_faults(self, envelope: Envelope) -> tuple[list[str], str | None]:
        """The recipients left after the DATA-stage faults of their inboxes, and the reply of the
        first fault (each inbox's rules are tried once per message). The reply is held back once,
        for the longest delay among the faults that fired (:func:`data_hold`), not one delay after
        another per inbox: a message to many faulty inboxes waits at most ``MAX_DELAY_MS``."""
        faulty: dict[str, tuple[str, list[dict[str, Any]]]] = getattr(envelope, "faulty", {})
        mail_from = envelope.mail_from or ""
        decided: dict[str, Fault | None] = {}
        fired: list[Fault] = []
        kept = []
        for address in envelope.rcpt_tos:
            if address not in faulty:
                kept.append(address)
                continue
            inbox_id, rules = faulty[address]
            if inbox_id not in decided:
                try:
                    fault = await self.faults.check(inbox_id, rules, "data", mail_from, address)
                except Exception:
                    logger.exception("fault rules of %s could not be checked", inbox_id)
                    fault = None
                decided[inbox_id] = fault
                if fault is not None:
                    await self._note(fault, inbox_id, mail_from)
                    fired.append(fault)
            if decided[inbox_id] is None:
                kept.append(address)
        await hold(data_hold(fired))
        return kept, (fired[0].reply if fired else None)

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        rcpt_tos = list(envelope.rcpt_tos)
        if getattr(envelope, "faulty", None):
            rcpt_tos, reply = await self._data_faults(envelope)
            if not rcpt_tos:
                assert reply is not None
                return reply
        sandbox: Sandbox | None = session.auth_data
        incoming = pipeline.Incoming(
            raw=envelope.original_content or b"",
            mail_from=envelope.mail_from or "",
            rcpt_tos=rcpt_tos,
            admitted=getattr(envelope, "admitted", None),
            client_ip=peer_ip(session),
            helo=session.host_name or "",
            credential=sandbox.credential_id if sandbox is not None else None,
        )
        verdict = self.checks.start(incoming)  # SPF, DKIM, DMARC, ARC: beside the digest
        if self.digest_in_session and len(incoming.raw) <= DIGEST_IN_SESSION_BYTES:
            try:
                incoming = pipeline.digested(incoming)
            except Exception:  # never expected (parsing takes any bytes): the writer tries again
                logger.exception("could not digest a message; the writer will")
        if verdict is not None:
            incoming = dataclasses.replace(incoming, authentication=await verdict)
        try:
            receipts = await self.group_commit.store(incoming)
        except Exception:
            logger.exception("receive failed; answering 451 so the sender retries")
            return "451 4.3.0 Temporary failure, try again later"
        stored = [d for d in receipts if d.email_id]
        if stored:
            return f"250 2.0.0 OK {stored[0].email_id}"
        refusal = next((d.refusal for d in receipts if d.refusal), pipeline.NO_SUCH_INBOX)
        return refusal.smtp_reply


COMMAND_LINE_LIMIT = 1024  # bytes a command line may take, CRLF included (RFC 5321: 512)
DATA_LINE_LIMIT = 65_536  # real mail breaks RFC 5321's 1,000; still bounded
DATA_BLOCK = 64 * 1024  # DATA is read in blocks of at most this many bytes
BAD_CHARACTERS = "501 5.5.2 Syntax error: CR, LF or NUL in the command"
TOO_MANY_CONNECTIONS = b"421 4.7.0 Too many connections from your address\r\n"
LINE_TOO_LONG = "500 5.5.2 Line too long"


class _CommandReader(asyncio.StreamReader):
    """The session's stream; remembers the last command line exactly as it arrived (aiosmtpd
    strips CR and LF from it before a command handler sees it)."""

    last_line = b""

    async def readuntil(self, separator: bytes = b"\n") -> bytes:
        line = await super().readuntil(separator)
        self.last_line = line
        return line


class DataReader:
    """The DATA payload, fed in blocks: finds the end of data (``CRLF . CRLF`` and nothing
    else, so a bare ``LF . LF``, ``CR . CR`` or the like is message content, never an end that
    could smuggle a second message), undoes dot-stuffing, and keeps nothing past the limits: once
    the message is over ``size_limit`` bytes, or a line over ``line_limit``, what follows is
    read and thrown away until the end of data. Memory: the kept message plus one block."""

    def __init__(self, size_limit: int | None, line_limit: int) -> None:
        self.size_limit, self.line_limit = size_limit, line_limit
        self.parts: list[bytes] = []
        self.size = 0
        self.line_size = 0
        self.pending = bytearray()
        self.mid_line = False  # pending continues a line begun in an earlier block
        self.too_much = self.too_long = False

    def feed(self, block: bytes) -> bytes | None:
        """Takes one block; returns what follows the end of data once it is found, else None.

        The complete lines of the block go through :meth:`_take_lines` together (a 64 KB
        message is some 900 lines of base64: one Python step per line held up the event loop
        that every session shares)."""
        self.pending += block
        pending = self.pending
        if not self.mid_line and pending.startswith(b".\r\n"):
            end = 0  # the end of data: a line that is a lone "."
        else:
            found = pending.find(b"\r\n.\r\n")
            end = found + 2 if found >= 0 else -1
        if end >= 0:
            lines = end
        else:
            last = pending.rfind(b"\r\n")
            lines = last + 2 if last >= 0 else 0
        if lines:
            self._take_lines(bytes(pending[:lines]))
        if end >= 0:
            rest = bytes(pending[end + 3 :])
            self.pending = bytearray()
            return rest
        del pending[:lines]
        if len(pending) > DATA_BLOCK:  # a long line: take its start, keep a CR that may end it
            keep = 1 if pending.endswith(b"\r") else 0
            self._take(bytes(pending[: len(pending) - keep]))
            del pending[: len(pending) - keep]
            self.mid_line = True
        return None

    def _take_lines(self, lines: bytes) -> None:
        """Whole lines (``lines`` ends with CRLF; the first continues an earlier piece when
        ``mid_line``): one leading dot of each line removed, as :meth:`_take` does per line."""
        if not self.mid_line and lines.startswith(b"."):
            lines = lines[1:]
        content = lines.replace(b"\r\n.", b"\r\n")  # after a CRLF, a line begins
        if self.line_size + len(content) > self.line_limit:  # one of them may be too long
            parts = content.split(b"\r\n")
            longest = max([self.line_size + len(parts[0]), *(len(p) for p in parts[1:-1])]) + 2
            self.too_long = self.too_long or longest > self.line_limit
        self._keep(content)
        self.mid_line = False
        self.line_size = 0

    def _take(self, piece: bytes) -> None:
        """The start of a line too long to wait for its end (see :meth:`feed`)."""
        if not self.mid_line and piece.startswith(b"."):
            piece = piece[1:]
        self.line_size += len(piece)
        if self.line_size > self.line_limit:
            self.too_long = True
        self._keep(piece)

    def _keep(self, content: bytes) -> None:
        """Keeps ``content`` unless the message is over a limit (then nothing is kept)."""
        self.size += len(content)
        if self.size_limit and self.size > self.size_limit:
            self.too_much = True
        if self.too_long or self.too_much:
            self.parts.clear()
        else:
            self.parts.append(content)

    @property
    def content(self) -> bytes:
        return b"".join(self.parts)


def _no_control_characters(method: Any) -> Any:
    """MAIL and RCPT: a command line with a CR, LF or NUL other than its final CRLF is
    refused with ``501`` (aiosmtpd would strip or split them and accept the rest)."""

    @functools.wraps(method)
    async def checked(self: PigeonholeSMTP, arg: str | None) -> None:
        line = self.reader.last_line  # type: ignore[attr-defined]
        body = line[:-2] if line.endswith(b"\r\n") else None
        if body is None or b"\r" in body or b"\n" in body or b"\x00" in body:
            await self.push(BAD_CHARACTERS)
            return
        await method(self, arg)

    return checked


_ATEXT = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+"
_SIMPLE_PATH_RE = re.compile(
    rf"<({_ATEXT}(?:\.{_ATEXT})*@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*)>(?:[ \t]+(?=[^ \t(])|\Z)"
)


class PigeonholeSMTP(AdaptedSMTP):
    """aiosmtpd's server, hardened: command lines of at most ``COMMAND_LINE_LIMIT`` bytes,
    DATA read in bounded blocks (:class:`DataReader`), ``501`` for control characters in
    MAIL and RCPT, sessions idle for ``SMTP_IDLE_TIMEOUT`` closed, at most
    ``SMTP_MAX_CONNECTIONS_PER_IP`` sessions per client address (``421`` for the next), and
    our reply (and event) for oversized messages."""

    line_length_limit = COMMAND_LINE_LIMIT  # aiosmtpd's stream limit: commands only, here

    def parse_path(self, arg: str) -> tuple[str | None, str | None]:
        """``<local@domain> params`` with a dot-atom local part and a plain domain (nearly every
        MAIL and RCPT) without the email package's header parser, which took a noticeable share
        of the receiver's CPU; anything else (quoted local parts, routes, comments) goes to it. A
        path that makes the parser itself fail (``<@`` raises IndexError inside CPython 3.11's
        email package) is a malformed address (553), not a 500 with a traceback in the log."""
        simple = _SIMPLE_PATH_RE.match(arg)
        if simple is None:
            try:
                return super().parse_path(arg)
            except Exception:
                return None, None
        address = simple.group(1)
        if self.local_part_limit and address.index("@") > self.local_part_limit:
            return None, None
        return address, arg[simple.end() :]

    def __init__(self, handler: Handler, *, implicit_tls: bool = False, **kwargs: Any) -> None:
        # aiosmtpd's set-up runs for the handler's first session only (per port kind); every
        # session reads from a stream that remembers the raw command line.
        super().__init__(
            handler,
            template=handler.implicit_tls_state if implicit_tls else handler.protocol_state,
            reader=lambda loop: _CommandReader(limit=COMMAND_LINE_LIMIT, loop=loop),
            **kwargs,
        )
        self.connections = handler.connections
        self.client_ip: str | None = None
        self.refused = False
        self.implicit_tls = implicit_tls

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        if self.tls_started:  # the same connection, now over TLS: already counted
            super().connection_made(transport)
            return
        peer = transport.get_extra_info("peername")
        ip = peer[0] if isinstance(peer, tuple) and peer else None
        if ip is not None and self.connections[ip] >= settings.SMTP_MAX_CONNECTIONS_PER_IP:
            self.refused = True
            transport.write(TOO_MANY_CONNECTIONS)  # type: ignore[attr-defined]
            transport.close()
            return
        self.client_ip = ip
        if ip is not None:
            self.connections[ip] += 1
        super().connection_made(transport)

    def connection_lost(self, error: Exception | None) -> None:
        if self.refused:
            return
        if self.client_ip is not None:
            self.connections[self.client_ip] -= 1
            if self.connections[self.client_ip] <= 0:
                del self.connections[self.client_ip]
            self.client_ip = None
        super().connection_lost(error)
        self.release_tls()

    def eof_received(self) -> bool | None:
        if self.refused:
            return False
        keep_open = super().eof_received()
        return False if self.implicit_tls else keep_open  # True has no effect over TLS

    async def handle_exception(self, error: Exception) -> str:
        if isinstance(error, TLSSetupException):  # the client's failure: one line, no traceback
            logger.info("TLS handshake failed from %s: %r", self.client_ip, error.__cause__)
            return "454 4.7.0 TLS not available due to temporary reason"
        return await super().handle_exception(error)

    @syntax("AUTH <mechanism> [initial-response]")
    async def smtp_AUTH(self, arg: str | None) -> None:
        """AUTH PLAIN and LOGIN with an inbox's sandbox credentials (``mail.smtpd.auth``); our
        own rather than aiosmtpd's, whose authenticator is called synchronously (a database
        lookup would stall every session) and which answers twice to an aborted dialogue."""
        if await self.check_helo_needed("EHLO"):
            return
        assert self.session is not None
        handler: Handler = self.event_handler
        if not self.session.extended_smtp:
            await self.push("500 Error: command 'AUTH' not recognized")
        elif not (self.implicit_tls or self.tls_started or handler.plaintext_login):
            await self.push(AUTH_NEEDS_TLS)
        elif self.session.authenticated:
            await self.push("503 5.5.1 Already authenticated")
        elif self.envelope is not None and self.envelope.mail_from is not None:
            await self.push("503 5.5.1 AUTH not permitted during a mail transaction")
        elif not arg or len(arg.split()) > 2:
            await self.push("501 5.5.4 Syntax: AUTH mechanism [initial-response]")
        elif arg.split()[0].upper() not in MECHANISMS:
            await self.push("504 5.5.4 Unrecognized authentication type")
        else:
            mechanism, *initial = arg.split()
            given = await self._credentials(mechanism.upper(), initial[0] if initial else None)
            if given is not None:
                await self.push(await self._authenticate(handler, *given))

    async def _credentials(self, mechanism: str, initial: str | None) -> tuple[str, str] | None:
        """The username and password of a PLAIN or LOGIN dialogue, or None when it failed (its
        reply sent already)."""
        if mechanism == "PLAIN":
            blob = await self._decoded(initial, "")
            if blob is None:
                return None
            parts = blob.split(b"\x00")
            if len(parts) != 3:
                await self.push("501 5.5.2 Can't split auth value")
                return None
            login, password = parts[1], parts[2]
        else:
            login_blob = await self._decoded(initial, "Username:")
            if login_blob is None:
                return None
            password_blob = await self._decoded(None, "Password:")
            if password_blob is None:
                return None
            login, password = login_blob, password_blob
        return login.decode("utf-8", "replace"), password.decode("utf-8", "replace")

    async def _decoded(self, initial: str | None, challenge: str) -> bytes | None:
        """``initial`` (an initial response) decoded, else the client's answer to
        ``challenge``; None when it aborted or sent no base64 (replied to already)."""
        if initial is None:
            answer = await self.challenge_auth(challenge)
            return None if answer is MISSING else answer  # type: ignore[return-value]
        if initial == "=":  # RFC 4954: an empty initial response
            return b""
        try:
            return base64.b64decode(initial.encode(), validate=True)
        except (ValueError, binascii.Error):
            await self.push("501 5.5.2 Can't decode base64")
            return None

    async def _authenticate(self, handler: Handler, username: str, password: str) -> str:
        """The reply to an AUTH with these credentials; on success the session is the
        credential's (``session.auth_data``, a :class:`Sandbox`)."""
        assert self.session is not None
        try:
            if await handler.login_failures.limited(self.client_ip, username):
                return AUTH_LIMITED
            sandbox = await _run(sandbox_login, username, password)
            if sandbox is None:
                await handler.login_failures.failed(self.client_ip, username)
                return AUTH_INVALID
        except Exception:
            logger.exception("AUTH could not be checked")
            return AUTH_UNAVAILABLE
        self.session.authenticated = True
        self.session.auth_data = sandbox
        return AUTH_OK

    smtp_MAIL = _no_control_characters(SMTP.smtp_MAIL)
    smtp_RCPT = _no_control_characters(SMTP.smtp_RCPT)

    @syntax("DATA")
    async def smtp_DATA(self, arg: str | None) -> None:
        if await self.check_helo_needed() or await self.check_auth_needed("DATA"):
            return
        assert self.envelope is not None
        if not self.envelope.rcpt_tos:
            await self.push("503 Error: need RCPT command")
            return
        if arg:
            await self.push("501 Syntax: DATA")
            return
        await self.push("354 End data with <CR><LF>.<CR><LF>")
        data = DataReader(self.data_size_limit, DATA_LINE_LIMIT)
        while True:
            block = await self.reader.read(DATA_BLOCK)
            if not block:  # the client went away mid-message
                if self.transport is not None:
                    self.transport.close()
                return
            self.restart_idle_timer()  # idle means sending nothing; a long upload is not idle
            rest = data.feed(block)
            if rest is not None:
                break
        if rest:  # pipelined commands after the end of data: back into the stream
            self.push_back(rest)
        if data.too_much or data.too_long:  # the reply first: push() reads the envelope
            await self.push("552 Error: Too much mail data" if data.too_much else LINE_TOO_LONG)
            self.new_envelope()
            return
        content = data.content
        self.envelope.content = self.envelope.original_content = content
        status = await self.call_hook("DATA")
        self.new_envelope()
        await self.push("250 OK" if status is MISSING else status)

    async def push(self, status: str | bytes) -> None:
        if isinstance(status, str) and status.startswith("552 Error:"):
            envelope = self.envelope
            if envelope is not None and envelope.rcpt_tos:
                rcpts, sender = list(envelope.rcpt_tos), envelope.mail_from or ""
                try:
                    await _run(pipeline.note_oversized, rcpts, sender)
                except Exception:
                    logger.exception("could not record oversized message")
            status = pipeline.TOO_LARGE.smtp_reply
        await super().push(status)


def make_protocol(
    handler: Handler, tls: ssl.SSLContext | None = None, *, implicit_tls: bool = False
) -> PigeonholeSMTP:
    """A session; ``tls`` offers STARTTLS (never on the implicit-TLS port, which is TLS already).
    EHLO offers AUTH over TLS, and in plain text too when ``SMTP_AUTH_ALLOW_PLAINTEXT``."""
    return PigeonholeSMTP(
        handler,
        auth_require_tls=not (implicit_tls or handler.plaintext_login),
        implicit_tls=implicit_tls,
        data_size_limit=settings.MAX_MESSAGE_BYTES,
        enable_SMTPUTF8=True,
        decode_data=False,
        hostname=settings.SMTP_HOSTNAME,
        ident="Pigeonhole ESMTP",
        timeout=settings.SMTP_IDLE_TIMEOUT,
        tls_context=None if implicit_tls else tls,
    )


# A client that opens the implicit-TLS port and never finishes the handshake holds a socket
# this long at most (asyncio's default is 60 s).
TLS_HANDSHAKE_TIMEOUT = 15.0


async def start_servers(
    host: str,
    port: int,
    writer: BatchWriter | None = None,
    *,
    tls: ssl.SSLContext | None = None,
    smtps_port: int | None = None,
) -> list[asyncio.Server]:
    """Listens on ``host:port`` (SO_REUSEPORT) in the running event loop, with STARTTLS when
    ``tls`` is given, and with implicit TLS on ``smtps_port`` too when that is given (it needs
    ``tls``); batches of mail are written by ``writer`` (a thread of this process unless given:
    ``mail.smtpd.writer``), one for both ports."""
    if smtps_port is not None and tls is None:
        raise ValueError("An implicit-TLS port needs a certificate (SMTP_TLS_CERT, SMTP_TLS_KEY).")
    loop = asyncio.get_running_loop()
    handler = Handler(writer or ThreadWriter())
    servers = [
        await loop.create_server(
            lambda: make_protocol(handler, tls), host=host, port=port, reuse_port=True
        )
    ]
    if smtps_port is not None:
        try:
            servers.append(
                await loop.create_server(
                    lambda: make_protocol(handler, tls, implicit_tls=True),
                    host=host,
                    port=smtps_port,
                    reuse_port=True,
                    ssl=tls,
                    ssl_handshake_timeout=TLS_HANDSHAKE_TIMEOUT,
                )
            )
        except OSError:
            servers[0].close()
            raise
    return servers


async def start_server(
    host: str, port: int, writer: BatchWriter | None = None, *, tls: ssl.SSLContext | None = None
) -> asyncio.Server:
    """The SMTP port alone (see :func:`start_servers`)."""
    return (await start_servers(host, port, writer, tls=tls))[0]

"""Hostile SMTP clients against the real smtpd (issue 11, matrix 5): ``mail.smtpd.server`` served on
127.0.0.1, spoken to over real sockets (smtplib, or raw bytes where smtplib would refuse to
send something this wrong).

- ``SIZE`` + 1 bytes → ``552 5.3.4``, nothing stored; announced too big in ``MAIL … SIZE=`` → 552.
- Recipient 101 → ``452``; the first 100 get the message.
- A command line over 1,024 bytes → ``500``, and a DATA line over 64 KB → ``500``; in both cases
  the server reads and discards in bounded blocks, shown with an 8 MB line: the process's peak
  memory grows by far less than the line (and the session goes on afterwards).
- Every SMTP-smuggling end-of-data variant (``\\n.\\n``, ``\\r.\\r``, ``\\n.\\r\\n``,
  ``\\r\\n.\\r``, ``\\r\\n.\\n``, NUL variants, …) followed by a complete second transaction
  → exactly 1 message stored (the smuggled one is content of the first), 0 second messages.
- CR, LF or NUL inside ``MAIL``/``RCPT`` → ``501``, nothing stored.
- An idle session is closed after ``SMTP_IDLE_TIMEOUT``; a client IP's
  ``SMTP_MAX_CONNECTIONS_PER_IP`` + 1st session gets ``421`` (and a slot frees when one closes).
- The hostile corpus over SMTP: each message gets 250 with its raw bytes stored, or a 5xx and
  nothing stored.
"""

from __future__ import annotations

import smtplib
import socket
import time
from collections.abc import Callable

import pytest

from apikeys.models import Workspace
from inboxes import services as inbox_services
from inboxes.models import Inbox
from mail.models import Email, RawMessage
from mail.smtpd.server import MAX_RECIPIENTS
from tests.conftest import SmtpServer
from tests.security.hostile_mail import CORPUS, RssWatch

MB = 1024 * 1024


@pytest.fixture
def inbox(workspace: Workspace) -> Inbox:
    return inbox_services.inbox_create(workspace=workspace, local_part="limits")


class Raw:
    """A raw SMTP session: bytes out, reply lines in."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.buffer = b""
        self.greeting = self.reply()

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def reply(self) -> bytes:
        """One complete (possibly multi-line) reply."""
        while True:
            lines = self.buffer.split(b"\r\n")
            for i, line in enumerate(lines[:-1]):
                if len(line) < 4 or line[3:4] != b"-":
                    self.buffer = b"\r\n".join(lines[i + 1 :])
                    return b"\r\n".join(lines[: i + 1])
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError(f"closed; had {self.buffer!r}")
            self.buffer += chunk

    def command(self, line: bytes) -> bytes:
        self.send(line + b"\r\n")
        return self.reply()

    def closed(self, within: float) -> bool:
        self.sock.settimeout(within)
        try:
            while True:
                if not self.sock.recv(65536):
                    return True
        except TimeoutError:
            return False
        except ConnectionError:
            return True

    def close(self) -> None:
        self.sock.close()


def _message(subject: str, to: str) -> bytes:
    return f"From: a@example.org\r\nTo: {to}\r\nSubject: {subject}\r\n\r\nbody\r\n".encode()


def test_size_plus_one_is_refused_and_nothing_stored(
    settings, smtp_server: SmtpServer, inbox: Inbox
) -> None:  # type: ignore[no-untyped-def]
    settings.MAX_MESSAGE_BYTES = 100_000  # read by the server for each new session
    head = _message("big", inbox.address)
    filler = b"x" * 76 + b"\r\n"
    exact = head + filler * ((100_000 - len(head)) // len(filler))
    exact += b"y" * (100_000 - len(exact) - 2) + b"\r\n"
    assert len(exact) == 100_000
    with smtp_server.client() as smtp:
        smtp.ehlo()
        assert int(smtp.esmtp_features["size"]) == 100_000
        smtp.sendmail("a@example.org", [inbox.address], exact)  # exactly SIZE: stored
        # SIZE + 1, not announced in MAIL: found while reading DATA
        assert smtp.mail("a@example.org")[0] == 250
        assert smtp.rcpt(inbox.address)[0] == 250
        code, reply = smtp.data(exact[:-2] + b"y\r\n")
        assert (code, reply[:5]) == (552, b"5.3.4")
        code, _ = smtp.mail("a@example.org", ["SIZE=100001"])  # announced too big
        assert code == 552
    sizes = list(Email.objects.filter(inbox=inbox).values_list("size", flat=True))
    assert sizes == [100_000]


def test_recipients_over_the_limit_get_452(smtp_server: SmtpServer, workspace: Workspace) -> None:
    inboxes = [
        inbox_services.inbox_create(workspace=workspace, local_part=f"r{i}")
        for i in range(MAX_RECIPIENTS + 1)
    ]
    with smtp_server.client() as smtp:
        smtp.ehlo()
        smtp.mail("a@example.org")
        codes = [smtp.rcpt(inbox.address)[0] for inbox in inboxes]
        assert codes == [250] * MAX_RECIPIENTS + [452]
        code, _ = smtp.data(_message("many", "x@pigeonhole.test"))
        assert code == 250
    stored = Email.objects.filter(workspace=workspace).values_list("inbox__local_part", flat=True)
    assert sorted(stored) == sorted(f"r{i}" for i in range(MAX_RECIPIENTS))


def test_over_long_command_line_is_refused_without_buffering(
    smtp_server: SmtpServer, inbox: Inbox, figure: Callable[[str], None]
) -> None:
    session = Raw(smtp_server.port)
    assert session.command(b"EHLO client").startswith(b"250")
    assert session.command(b"NOOP " + b"x" * 1100).startswith(b"500")
    with RssWatch() as memory:  # 8 MB in one command line: read and thrown away in pieces
        for _ in range(8):
            session.send(b"MAIL FROM:<" + b"a" * MB)
        session.send(b">\r\n")
        assert session.reply().startswith(b"500")
    growth = memory.growth
    # the session goes on
    assert session.command(b"MAIL FROM:<a@example.org>").startswith(b"250")
    assert session.command(f"RCPT TO:<{inbox.address}>".encode()).startswith(b"250")
    session.close()
    figure(f"smtp: 8 MB command line -> 500, peak memory growth {growth / MB:.1f} MB")
    assert growth < 4 * MB


def test_over_long_data_line_is_refused_without_buffering(
    smtp_server: SmtpServer, inbox: Inbox, figure: Callable[[str], None]
) -> None:
    session = Raw(smtp_server.port)
    session.command(b"EHLO client")
    assert session.command(b"MAIL FROM:<a@example.org>").startswith(b"250")
    assert session.command(f"RCPT TO:<{inbox.address}>".encode()).startswith(b"250")
    assert session.command(b"DATA").startswith(b"354")
    block = b"y" * MB
    with RssWatch() as memory:
        session.send(b"Subject: long\r\n\r\n")
        for _ in range(20):  # a 20 MB line, under the 25 MB message limit
            session.send(block)
        session.send(b"\r\n.\r\n")
        assert session.reply().startswith(b"500")
    growth = memory.growth
    assert session.command(b"NOOP").startswith(b"250")  # the session goes on
    session.close()
    figure(f"smtp: 20 MB DATA line -> 500, peak memory growth {growth / MB:.1f} MB")
    assert growth < 8 * MB
    assert not Email.objects.filter(inbox=inbox).exists()


def test_oversized_data_is_not_buffered(
    settings, smtp_server: SmtpServer, inbox: Inbox, figure: Callable[[str], None]
) -> None:  # type: ignore[no-untyped-def]
    settings.MAX_MESSAGE_BYTES = 1 * MB
    server = smtp_server
    session = Raw(server.port)
    session.command(b"EHLO client")
    session.command(b"MAIL FROM:<a@example.org>")
    session.command(f"RCPT TO:<{inbox.address}>".encode())
    assert session.command(b"DATA").startswith(b"354")
    chunk = (b"z" * 998 + b"\r\n") * 1000  # 1 MB
    with RssWatch() as memory:
        for _ in range(30):  # 30 MB against a 1 MB limit
            session.send(chunk)
        session.send(b".\r\n")
        assert session.reply().startswith(b"552")
    growth = memory.growth
    session.close()
    figure(f"smtp: 30 MB of DATA against SIZE 1 MB -> 552, peak memory growth {growth / MB:.1f} MB")
    assert growth < 8 * MB
    assert not Email.objects.filter(inbox=inbox).exists()


SMUGGLING_ENDS = [
    b"\n.\n",
    b"\r.\r",
    b"\n.\r\n",
    b"\r\n.\n",
    b"\r.\r\n",
    b"\r\n.\r",
    b"\r\n.\r\r\n",
    b"\r\n.\x00\r\n",
    b"\r\n\x00.\r\n",
    b"\r\n.\r\x00\n",
    b"\r\x00\n.\r\n",
    b"\n\x00.\x00\n",
    b"\r\n. \r\n",
    b"\r\n.\t\r\n",
    b"\r\n..\r\n",
    b"\r\n\r.\r\n",
    b"\n\r\n.\n\r\n",
]


@pytest.mark.parametrize("end", SMUGGLING_ENDS, ids=[repr(e)[2:-1] for e in SMUGGLING_ENDS])
def test_smuggled_end_of_data_yields_no_second_message(
    end: bytes, smtp_server: SmtpServer, inbox: Inbox
) -> None:
    smuggled = (
        b"MAIL FROM:<admin@bank.example>\r\nRCPT TO:<" + inbox.address.encode() + b">\r\n"
        b"DATA\r\nFrom: admin@bank.example\r\nSubject: smuggled\r\n\r\nsecond\r\n.\r\n"
    )
    session = Raw(smtp_server.port)
    session.command(b"EHLO client")
    assert session.command(b"MAIL FROM:<a@example.org>").startswith(b"250")
    assert session.command(f"RCPT TO:<{inbox.address}>".encode()).startswith(b"250")
    assert session.command(b"DATA").startswith(b"354")
    session.send(b"From: a@example.org\r\nSubject: first\r\n\r\nfirst" + end + smuggled)
    session.send(b"\r\n.\r\n")  # the real end of the first message
    replies = [session.reply()]
    # whatever the server makes of it, nothing more arrives as a transaction of its own
    session.send(b"QUIT\r\n")
    try:
        while True:
            replies.append(session.reply())
    except (ConnectionError, TimeoutError):
        pass
    session.close()
    emails = list(Email.objects.filter(inbox=inbox))
    assert len(emails) == 1, replies
    assert emails[0].subject == "first"
    raw = bytes(RawMessage.objects.get(email=emails[0]).content)
    assert b"Subject: smuggled" in raw  # the smuggled transaction is content of the first
    assert sum(r.startswith(b"250 2.0.0 OK") for r in replies) == 1, replies


CONTROL_CHARACTERS = [
    (b"MAIL FROM:<a\rb@example.org>", "CR in MAIL"),
    (b"MAIL FROM:<a@example.org>\r", "CR before CRLF in MAIL"),
    (b"MAIL FROM:<a\x00b@example.org>", "NUL in MAIL"),
    (b"MAIL FROM:<a@example.org>\x00", "NUL at the end of MAIL"),
    (b"RCPT TO:<{to}>\r", "CR before CRLF in RCPT"),
    (b"RCPT TO:<{to}\x00>", "NUL in RCPT"),
    (b"RCPT TO:<x\r@pigeonhole.test> NOTIFY=NEVER", "CR in RCPT"),
]


@pytest.mark.parametrize(
    ("line", "what"), CONTROL_CHARACTERS, ids=[what for _, what in CONTROL_CHARACTERS]
)
def test_control_characters_in_mail_and_rcpt_get_501(
    line: bytes, what: str, smtp_server: SmtpServer, inbox: Inbox
) -> None:
    session = Raw(smtp_server.port)
    session.command(b"EHLO client")
    if line.startswith(b"RCPT"):
        assert session.command(b"MAIL FROM:<a@example.org>").startswith(b"250")
    assert session.command(line.replace(b"{to}", inbox.address.encode())).startswith(b"501")
    session.close()


@pytest.mark.parametrize("command", [b"MAIL FROM:<a@example.org>", b"RCPT TO:<{to}>"])
def test_bare_lf_inside_mail_and_rcpt_gets_501(
    command: bytes, smtp_server: SmtpServer, inbox: Inbox
) -> None:
    """A LF inside the command ends the line there (RFC 5321 lines end in CRLF): the bare-LF
    line is refused with 501, and its remainder is a line of its own (never an address)."""
    session = Raw(smtp_server.port)
    session.command(b"EHLO client")
    command = command.replace(b"{to}", inbox.address.encode())
    if command.startswith(b"RCPT"):
        assert session.command(b"MAIL FROM:<a@example.org>").startswith(b"250")
    head, tail = command[:-3], command[-3:]
    session.send(head + b"\n" + tail + b"\r\n")
    assert session.reply().startswith(b"501")
    assert session.reply()[:1] == b"5"
    session.close()


@pytest.mark.parametrize("command", [b"MAIL FROM:<a@example.org>", b"RCPT TO:<{to}>"])
def test_mail_and_rcpt_ended_by_a_bare_lf_get_501(
    command: bytes, smtp_server: SmtpServer, inbox: Inbox
) -> None:
    session = Raw(smtp_server.port)
    session.command(b"EHLO client")
    if command.startswith(b"RCPT"):
        assert session.command(b"MAIL FROM:<a@example.org>").startswith(b"250")
    session.send(command.replace(b"{to}", inbox.address.encode()) + b"\n")
    assert session.reply().startswith(b"501")
    session.close()


def test_clean_mail_and_rcpt_still_accepted(smtp_server: SmtpServer, inbox: Inbox) -> None:
    assert smtp_server.send(_message("clean", inbox.address), to=[inbox.address]) == {}
    assert Email.objects.filter(inbox=inbox).count() == 1


def test_idle_session_is_closed(settings, smtp_server: SmtpServer) -> None:  # type: ignore[no-untyped-def]
    settings.SMTP_IDLE_TIMEOUT = 1.0
    server = smtp_server
    idle = Raw(server.port)
    assert idle.greeting.startswith(b"220")
    busy = Raw(server.port)
    # the busy session keeps talking past the idle timeout and stays open
    for _ in range(6):
        assert busy.command(b"NOOP").startswith(b"250")
        time.sleep(0.3)
    assert idle.closed(within=10.0)
    assert not busy.closed(within=0.1)
    busy.close()


def test_connections_per_ip_are_capped(settings, smtp_server: SmtpServer) -> None:  # type: ignore[no-untyped-def]
    settings.SMTP_MAX_CONNECTIONS_PER_IP = 5
    server = smtp_server
    sessions = [Raw(server.port) for _ in range(5)]
    assert all(s.greeting.startswith(b"220") for s in sessions)
    extra = Raw(server.port)
    assert extra.greeting.startswith(b"421")
    assert extra.closed(within=10.0)
    sessions.pop().close()
    deadline = time.monotonic() + 10  # the server sees the close, then frees the slot
    while True:
        again = Raw(server.port)
        if again.greeting.startswith(b"220") or time.monotonic() > deadline:
            break
        again.close()
        time.sleep(0.05)
    assert again.greeting.startswith(b"220")
    assert again.command(b"EHLO client").startswith(b"250")
    for session in [*sessions, again]:
        session.close()


def _after_smtp(raw: bytes) -> bytes:
    """What RFC 5321 delivers of ``raw`` sent by smtplib: smtplib dot-stuffs every line start
    (after any LF) and ends the data with CRLF; the server removes one leading dot from each
    CRLF-delimited line."""
    sent = smtplib._quote_periods(raw)  # type: ignore[attr-defined]
    if not sent.endswith(b"\r\n"):
        sent += b"\r\n"
    return b"\r\n".join(line[1:] if line[:1] == b"." else line for line in sent.split(b"\r\n"))


def test_hostile_corpus_over_smtp(
    smtp_server: SmtpServer, inbox: Inbox, figure: Callable[[str], None]
) -> None:
    """Each hostile message: 250 and its raw bytes stored, or a 5xx and nothing stored."""
    stored, refused, problems = 0, [], []
    for hostile in CORPUS:
        raw = hostile.build()
        before = Email.objects.filter(inbox=inbox).count()
        try:
            with smtp_server.client() as smtp:
                smtp.sendmail("a@example.org", [inbox.address], raw)
        except smtplib.SMTPResponseException as refusal:
            if not 500 <= refusal.smtp_code < 600:
                problems.append(f"{hostile.name}: {refusal.smtp_code} {refusal.smtp_error!r}")
            elif Email.objects.filter(inbox=inbox).count() != before:
                problems.append(f"{hostile.name}: refused but stored")
            refused.append(f"{hostile.name} ({refusal.smtp_code})")
            continue
        latest = Email.objects.filter(inbox=inbox).order_by("-pk").first()
        assert latest is not None
        if bytes(RawMessage.objects.get(email=latest).content) != _after_smtp(raw):
            problems.append(f"{hostile.name}: raw bytes differ")
        stored += 1
    figure(
        f"smtp: hostile corpus of {len(CORPUS)}: {stored} stored, {len(refused)} refused with "
        f"5xx: {', '.join(refused)}"
    )
    assert problems == [], problems
    assert stored + len(refused) == len(CORPUS)

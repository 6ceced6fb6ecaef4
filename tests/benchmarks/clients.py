"""Light asyncio clients on raw sockets: HTTP/1.1 GET (long-poll), SSE streams and SMTP.

The client shares the machine's cores with the server it measures, so it does the minimum: no
TLS, no pooling logic, no header objects, no SSE parser beyond counting a marker. Every timestamp
is ``time.perf_counter()`` taken right after the read that completed the event, in the one event
loop that also took the timestamp it is compared with.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from email.utils import formatdate, make_msgid

HOST = "127.0.0.1"
HEAD_END = b"\r\n\r\n"
NO_BODY = frozenset({204, 304})


class ProtocolError(Exception):
    """The server answered something the benchmark did not expect."""


@dataclass
class Response:
    status: int
    headers: dict[str, str]
    body: bytes


def _request(path: str, port: int, key: str, accept: str = "application/json") -> bytes:
    return (
        f"GET {path} HTTP/1.1\r\nHost: {HOST}:{port}\r\nAuthorization: Bearer {key}\r\n"
        f"Accept: {accept}\r\nUser-Agent: pigeonhole-bench\r\n\r\n"
    ).encode("ascii")


async def _read_head(reader: asyncio.StreamReader) -> tuple[int, dict[str, str]]:
    raw = await reader.readuntil(HEAD_END)
    lines = raw[:-4].decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/"):
        raise ProtocolError(f"not an HTTP status line: {lines[0]!r}")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return int(parts[1]), headers


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    body = bytearray()
    while True:
        size_line = await reader.readuntil(b"\r\n")
        size = int(size_line.split(b";", 1)[0].strip(), 16)
        if size == 0:
            await reader.readuntil(b"\r\n")  # no trailers are sent
            return bytes(body)
        body += await reader.readexactly(size)
        await reader.readexactly(2)


async def _read_body(reader: asyncio.StreamReader, status: int, headers: dict[str, str]) -> bytes:
    if status in NO_BODY or 100 <= status < 200:
        return b""
    if "chunked" in headers.get("transfer-encoding", "").lower():
        return await _read_chunked(reader)
    if "content-length" in headers:
        return await reader.readexactly(int(headers["content-length"]))
    return await reader.read()  # delimited by the close


class HttpConnection:
    """One keep-alive HTTP/1.1 connection for sequential GETs (reconnects when closed)."""

    def __init__(self, port: int, key: str) -> None:
        self.port, self.key = port, key
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def connect(self) -> None:
        self._reader, self._writer = await asyncio.open_connection(HOST, self.port)

    async def get(self, path: str) -> Response:
        """Sends the request and reads the whole response (once more on a stale connection)."""
        for attempt in range(2):
            if self._writer is None or self._writer.is_closing():
                await self.connect()
            assert self._reader is not None and self._writer is not None
            self._writer.write(_request(path, self.port, self.key))
            try:
                status, headers = await _read_head(self._reader)
            except (asyncio.IncompleteReadError, ConnectionError):
                self.close()
                if attempt:
                    raise
                continue
            body = await _read_body(self._reader, status, headers)
            if headers.get("connection", "").lower() == "close":
                self.close()
            return Response(status, headers, body)
        raise AssertionError("unreachable")

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        self._reader = self._writer = None


@dataclass(eq=False)
class SseStream:
    """One open ``text/event-stream`` response, read as raw bytes.

    ``open()`` returns once the server's ``: connected`` comment arrived (it is subscribed to the
    inbox's group before it sends the response head). ``follow()`` then reads until the server
    closes, calling ``on_hit(stream, t)`` for every occurrence of ``marker`` (an occurrence split
    between two reads is still found once).
    """

    port: int
    path: str
    key: str
    hits: list[float] = field(default_factory=list)
    closed: bool = False
    status: int = 0
    _reader: asyncio.StreamReader | None = None
    _writer: asyncio.StreamWriter | None = None
    _task: asyncio.Task | None = None

    async def open(self, timeout: float = 60.0) -> None:
        async with asyncio.timeout(timeout):
            self._reader, self._writer = await asyncio.open_connection(HOST, self.port)
            self._writer.write(_request(self.path, self.port, self.key, "text/event-stream"))
            self.status, headers = await _read_head(self._reader)
            if self.status != 200:
                body = await _read_body(self._reader, self.status, headers)
                self.close()
                raise ProtocolError(f"stream answered {self.status}: {body[:200]!r}")
            await self._reader.readuntil(b": connected")

    def follow(self, marker: bytes, on_hit: Callable[[SseStream, float], None]) -> None:
        self._task = asyncio.ensure_future(self._follow(marker, on_hit))

    async def _follow(self, marker: bytes, on_hit: Callable[[SseStream, float], None]) -> None:
        assert self._reader is not None
        keep = len(marker) - 1
        tail = b""
        try:
            while True:
                data = await self._reader.read(65536)
                if not data:
                    break
                now = time.perf_counter()
                window = tail + data
                for _ in range(window.count(marker)):
                    self.hits.append(now)
                    on_hit(self, now)
                tail = window[-keep:]
        except (ConnectionError, OSError):
            pass
        finally:
            self.closed = True

    def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
        if self._writer is not None:
            self._writer.close()
        self.closed = True


async def close_all(streams: list[SseStream]) -> None:
    for stream in streams:
        stream.close()
    await asyncio.sleep(0)


# --- SMTP ------------------------------------------------------------------------------------


def bench_message(to: str, seq: int) -> bytes:
    """A small sign-up style message with a verification code (CRLF line ends)."""
    code = f"{(seq * 7919) % 1_000_000:06d}"
    return (
        f"From: Bench Shop <shop@bench.example>\r\nTo: {to}\r\n"
        f"Subject: Your code is {code}\r\nDate: {formatdate()}\r\n"
        f"Message-ID: {make_msgid(domain='bench.example')}\r\n"
        "MIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n"
        f"Hello,\r\n\r\nyour verification code is {code}. It expires in 10 minutes.\r\n"
    ).encode()


async def _reply(reader: asyncio.StreamReader, expect: int) -> str:
    lines = []
    while True:
        line = (await reader.readuntil(b"\r\n")).decode("latin-1").rstrip("\r\n")
        lines.append(line)
        if len(line) < 4 or line[3] != "-":
            break
    if not lines[-1].startswith(str(expect)):
        raise ProtocolError(f"SMTP expected {expect}, got {' | '.join(lines)}")
    return lines[-1]


async def smtp_send(port: int, mail_from: str, rcpt: str, message: bytes) -> tuple[float, str]:
    """One transaction on a new connection; returns (perf_counter at the DATA 250, its text)."""
    reader, writer = await asyncio.open_connection(HOST, port)
    try:
        await _reply(reader, 220)
        writer.write(b"EHLO bench.example\r\n")
        await _reply(reader, 250)
        writer.write(f"MAIL FROM:<{mail_from}>\r\n".encode())
        await _reply(reader, 250)
        writer.write(f"RCPT TO:<{rcpt}>\r\n".encode())
        await _reply(reader, 250)
        writer.write(b"DATA\r\n")
        await _reply(reader, 354)
        stuffed = message.replace(b"\r\n.", b"\r\n..")
        if stuffed.startswith(b"."):
            stuffed = b"." + stuffed
        writer.write(stuffed + (b"" if stuffed.endswith(b"\r\n") else b"\r\n") + b".\r\n")
        line = await _reply(reader, 250)
        acked = time.perf_counter()
        writer.write(b"QUIT\r\n")
        with contextlib.suppress(Exception):
            await writer.drain()
        return acked, line
    finally:
        writer.close()

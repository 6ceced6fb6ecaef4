"""One writer for every smtpd of a host (``SMTP_WRITER=shared``, the default on PostgreSQL).

With a writer per smtpd (``writer.ProcessWriter``) two smtpds split the mail between two writers,
and each batch holds about half as many messages: the per-batch work (the transaction, the inbox
locks, the chain heads of the events, the wake-up publish, the hand-over) is shared by half as
many messages, and a message costs more CPU. Here the smtpds of a host that use the same
database and the same code hand their batches to one writer process over a Unix socket; the
writer merges what every smtpd sent while it wrote the previous batch into one transaction
(``pipeline.receive_many``) and answers each smtpd's request once that transaction committed.
The smtpd answers ``250`` only after that answer: the 250-after-commit promise holds as before.

- **Who runs it.** No process of its own in the Procfile: the first smtpd that finds no writer
  starts one (``python -m mail.smtpd.shared``), as a child, and every smtpd connects to its
  socket. The writer takes an exclusive ``flock`` on a lock file first (the kernel releases it
  when the writer dies, however it dies), so two smtpds starting at once start one writer; the
  loser exits at once and its smtpd connects to the winner. The socket and the lock live in
  ``SMTP_WRITER_DIR`` (a directory only this user may enter; the writer also checks each peer's
  uid), named after a digest of the database, of the settings and of the code
  (:func:`writer_key`): smtpds of another build (a deploy in progress), of another database or
  configured otherwise (another Celery queue, a changed environment: the writer keeps the
  settings of the smtpd that started it) get a writer of their own.
- **How long it lives.** While any smtpd is connected. When the last one has gone (stopped, or
  killed) and ``IDLE_EXIT_SECONDS`` pass without a new one, the writer closes its socket, drops
  its lock and exits. It ignores SIGINT and SIGTERM: a signal to the process group stops the
  smtpds, which finish their batches, and then the writer ends by itself.
- **A writer that dies** (killed, out of memory): its open transaction rolls back (PostgreSQL
  ends it with the connection), every smtpd with a request in flight answers those sessions
  ``451`` (``WriterLost``: the senders retry; a batch committed just before the death may arrive
  twice, as with any receiver that dies between its commit and its reply), and the next request
  of any smtpd starts a new writer.
- **An smtpd that dies**: its requests that the writer has not begun are dropped; one that is in
  the batch being written is committed, and its senders, who got no reply, send again.
- **A batch that fails** is written again message by message in the writer, so one message that
  cannot be stored costs its own sender a ``451``, never the other smtpds' senders.

The wire: frames of a 4-byte length and an 8-byte request id, then a pickle. A request is a list
of ``pipeline.Incoming`` (an empty list asks whether the writer is ready); the answer is, per
message, its list of ``pipeline.Receipt`` or the text of the error that kept it from being stored.
Only processes of this user reach the socket, and they run this code.

This module imports no model at import time: the writer imports it before Django is set up.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import errno
import fcntl
import gc
import hashlib
import logging
import os
import pickle
import re
import selectors
import signal
import socket
import stat
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mail.pipeline import Incoming, Receipt

logger = logging.getLogger(__name__)

HEADER = struct.Struct("!IQ")  # payload length, request id
# The writer merges whole requests up to these bounds (an smtpd's request holds at most 64
# messages and 16 MB: server.GroupCommit), so that one transaction stays short.
MAX_BATCH_MESSAGES = 256
MAX_BATCH_BYTES = 64 * 1024 * 1024
IDLE_EXIT_SECONDS = 2.0
# How long an smtpd waits for a writer to answer its connection (a new writer sets Django up
# first: a second or two, longer on a loaded machine) before it answers its sessions 451.
CONNECT_SECONDS = 60.0
ANOTHER_WRITER = 3  # the writer's exit status when another one holds the lock
# The packages whose code a writer runs: smtpds of another build get a writer of their own.
PACKAGES = ("config", "events", "apikeys", "inboxes", "labels", "mail", "outbox", "webhooks")


class WriteFailed(Exception):
    """The shared writer could not store this message (the reason is its text)."""


# --- where: the directory, the key ---------------------------------------------------------------


KEY_LENGTH = 20  # hex digits of writer_key in the socket's name
MAX_SOCKET_PATH = 107  # sockaddr_un's sun_path (108 bytes) less its terminating NUL


def private_directory(path: str) -> Path:
    """``path`` (``SMTP_WRITER_DIR``; empty: ``$XDG_RUNTIME_DIR/pigeonhole``, else
    ``<tmp>/pigeonhole-<uid>``), created with mode 0700; refused unless this user owns it and
    nobody else may enter it (anyone who could reach the socket could hand the writer mail)."""
    if not path:
        runtime = os.environ.get("XDG_RUNTIME_DIR")
        path = (
            str(Path(runtime) / "pigeonhole")
            if runtime
            else str(Path(tempfile.gettempdir()) / f"pigeonhole-{os.geteuid()}")
        )
    directory = Path(path)
    socket_path, _ = paths(directory, "0" * KEY_LENGTH)
    if len(os.fsencode(socket_path)) > MAX_SOCKET_PATH:
        # A Unix socket's path is at most 107 bytes: the writer could not listen, and every
        # smtpd would start one after another that fails (seen with a deep pytest tmp_path).
        raise RuntimeError(
            f"SMTP_WRITER_DIR {directory} is too long for a Unix socket: at most "
            f"{MAX_SOCKET_PATH - len(os.fsencode(socket_path)) + len(os.fsencode(directory))} "
            "bytes"
        )
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = directory.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o077:
        raise RuntimeError(
            f"SMTP_WRITER_DIR {directory} must be a directory owned by this user with mode 0700"
        )
    return directory


# Settings that concern one smtpd's own listener, never what its writer does with the mail: two
# smtpds that differ only in these still write alike.
LISTENER_SETTINGS = frozenset({"SMTP_PORT", "SMTPS_PORT"})
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def configuration(values: dict[str, Any]) -> str:
    """The settings a writer runs with (``values``: the uppercase Django settings), as text that
    two processes configured alike write alike: the writer is the child of the smtpd that
    started it and keeps that smtpd's settings for as long as it lives, so an smtpd configured
    otherwise (another Celery queue, webhook or authentication settings, a changed environment
    after a restart) must not hand it mail. Object addresses are left out of reprs."""
    lines = []
    for name in sorted(values):
        if name.isupper() and name not in LISTENER_SETTINGS:
            lines.append(f"{name}={_ADDRESS.sub('', repr(values[name]))}")
    return "\n".join(lines)


def writer_key(database: dict[str, Any], root: Path, settings_text: str = "") -> str:
    """A digest of the database the smtpd writes to, of its configuration (``settings_text``:
    :func:`configuration`) and of the code it runs (every ``.py`` file of ``PACKAGES``: path,
    size, modification time), so that only smtpds that would write alike share a writer."""
    digest = hashlib.sha256()
    for part in ("ENGINE", "NAME", "HOST", "PORT", "USER"):
        digest.update(f"{part}={database.get(part)}\0".encode())
    digest.update(f"{settings_text}\0".encode())
    digest.update(f"{sys.executable}\0{root}\0".encode())
    for package in PACKAGES:
        for folder, dirs, files in os.walk(root / package):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for name in sorted(files):
                if name.endswith(".py"):
                    info = os.stat(os.path.join(folder, name))
                    digest.update(f"{folder}/{name}:{info.st_size}:{info.st_mtime_ns}\0".encode())
    return digest.hexdigest()[:KEY_LENGTH]


def paths(directory: Path, key: str) -> tuple[Path, Path]:
    """The writer's socket and lock file."""
    return directory / f"writer-{key}.sock", directory / f"writer-{key}.lock"


def writer_pid(lock: Path) -> int | None:
    """The pid the running writer wrote into its lock file (tests and benchmarks)."""
    try:
        text = lock.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _frame(request: int, payload: Any) -> bytes:
    body = pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL)
    return HEADER.pack(len(body), request) + body


# --- the smtpd's side ----------------------------------------------------------------------------


class SharedWriter:
    """An smtpd's connection to its host's writer (see the module docstring)."""

    digest_in_session = True  # the writer only stores; the smtpd parses as each DATA ends
    merges = True  # requests go at once; the writer merges what waits (server.GroupCommit)

    def __init__(self, directory: str | Path | None = None) -> None:
        self._directory = directory
        self.socket_path: Path | None = None
        self.lock_path: Path | None = None
        self._stream: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        self._reading: asyncio.Task[None] | None = None
        self._waiting: dict[int, asyncio.Future[list[Any]]] = {}
        self._ids = 0
        self._connecting = asyncio.Lock()

    def _locate(self) -> None:
        if self.socket_path is not None:
            return
        from django.conf import settings
        from django.db import connections

        directory = private_directory(str(self._directory or settings.SMTP_WRITER_DIR))
        key = writer_key(
            connections["default"].settings_dict,
            Path(settings.BASE_DIR),
            configuration({name: getattr(settings, name) for name in dir(settings)}),
        )
        self.socket_path, self.lock_path = paths(directory, key)

    async def start(self) -> None:
        """Connects to the host's writer, starting one if there is none, before the port opens."""
        self._locate()
        await self._connection()

    @property
    def pid(self) -> int | None:
        """The pid of the writer this smtpd uses (tests and benchmarks)."""
        return writer_pid(self.lock_path) if self.lock_path else None

    async def store(self, messages: Sequence[Incoming]) -> list[list[Receipt] | Exception]:
        if not messages:
            return []
        connected = self._stream
        _, stream = connected if connected is not None else await self._connection()
        future = self._send(stream, list(messages))
        try:
            await stream.drain()
        except OSError as exc:
            self._lost(exc)
        outcome = await future
        return [o if isinstance(o, list) else WriteFailed(o) for o in outcome]

    def _send(self, stream: asyncio.StreamWriter, messages: list[Incoming]) -> asyncio.Future:
        self._ids += 1
        future: asyncio.Future[list[Any]] = asyncio.get_running_loop().create_future()
        self._waiting[self._ids] = future
        stream.write(_frame(self._ids, messages))
        return future

    async def _connection(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        async with self._connecting:
            if self._stream is None:
                self._stream = await self._connect()
                self._reading = asyncio.create_task(self._read(*self._stream))
            return self._stream

    async def _connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """A connection the writer has answered once (a writer that is closing its socket resets
        connections it has not accepted: those are tried again); starts a writer when none
        listens, and another one when the one started lost the race for the lock and the
        winner has gone too."""
        self._locate()
        assert self.socket_path is not None and self.lock_path is not None
        deadline = time.monotonic() + CONNECT_SECONDS
        started: subprocess.Popen[bytes] | None = None
        last_start = 0.0
        while True:
            try:
                reader, stream = await asyncio.open_unix_connection(str(self.socket_path))
                try:
                    stream.write(_frame(0, []))
                    size, _ = HEADER.unpack(await reader.readexactly(HEADER.size))
                    await reader.readexactly(size)
                except BaseException:
                    stream.close()
                    raise
                return reader, stream
            except (OSError, asyncio.IncompleteReadError) as exc:
                if time.monotonic() > deadline:
                    from mail.smtpd.writer import WriterLost

                    raise WriterLost(f"no writer answered on {self.socket_path}") from exc
                if (started is None or started.poll() is not None) and (
                    time.monotonic() - last_start > 1.0
                ):
                    started, last_start = self._start_writer(), time.monotonic()
                await asyncio.sleep(0.05)

    def _start_writer(self) -> subprocess.Popen[bytes]:
        assert self.socket_path is not None and self.lock_path is not None
        argv = [sys.executable, "-m", "mail.smtpd.shared", str(self.socket_path)]
        argv.append(str(self.lock_path))
        process = subprocess.Popen(argv, stdin=subprocess.DEVNULL)
        threading.Thread(target=process.wait, name="writer-reaper", daemon=True).start()
        return process

    async def _read(self, reader: asyncio.StreamReader, stream: asyncio.StreamWriter) -> None:
        try:
            while True:
                size, request = HEADER.unpack(await reader.readexactly(HEADER.size))
                outcome = pickle.loads(await reader.readexactly(size))
                future = self._waiting.pop(request, None)
                if future is not None and not future.done():
                    future.set_result(outcome)
        except (OSError, asyncio.IncompleteReadError) as exc:
            self._lost(exc)
        finally:
            stream.close()

    def _lost(self, exc: BaseException) -> None:
        """The writer went away: what it held is answered WriterLost, the next request
        connects again."""
        from mail.smtpd.writer import WriterLost

        if self._waiting:
            logger.error("the shared writer ended while it held %d request(s)", len(self._waiting))
        self._stream = None
        waiting, self._waiting = self._waiting, {}
        for future in waiting.values():
            if not future.done():
                future.set_exception(WriterLost())

    async def close(self) -> None:
        """Closes the connection once the requests in flight are answered (a stopping smtpd
        answers what the writer is writing for it); the writer ends when no smtpd is left."""
        deadline = time.monotonic() + CONNECT_SECONDS
        while self._waiting and self._stream is not None and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        stream, self._stream = self._stream, None
        if stream is not None:
            stream[1].close()
            with contextlib.suppress(OSError):
                await stream[1].wait_closed()
        if self._reading is not None:
            self._reading.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reading


# --- the writer's side ---------------------------------------------------------------------------


@dataclass
class _Client:
    sock: socket.socket
    buffer: bytearray = field(default_factory=bytearray)


@dataclass
class _Request:
    client: _Client
    id: int
    messages: list[Incoming]

    @property
    def size(self) -> int:
        return sum(len(m.raw) for m in self.messages)


class HostWriter:
    """The writer process's loop: accept smtpds, read their requests, write what waits as one
    batch, answer each request, repeat; exit once no smtpd has been connected for a while."""

    def __init__(self, socket_path: Path, lock_path: Path) -> None:
        self.socket_path, self.lock_path = socket_path, lock_path
        self.selector = selectors.DefaultSelector()
        self.clients: dict[socket.socket, _Client] = {}
        self.pending: collections.deque[_Request] = collections.deque()
        self.listener: socket.socket | None = None
        self.lock_fd = -1
        self.chunk = bytearray(1 << 20)  # one receive buffer (a new 1 MB bytes per recv costs)

    def lock(self) -> bool:
        """Takes the lock file (False: another writer has it) and writes this pid into it."""
        self.lock_fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(self.lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES):
                raise
            os.close(self.lock_fd)
            return False
        os.ftruncate(self.lock_fd, 0)
        os.write(self.lock_fd, f"{os.getpid()}\n".encode())
        return True

    def listen(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.socket_path.unlink()  # a dead writer's; we hold the lock, so no live one's
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(str(self.socket_path))
        os.chmod(self.socket_path, 0o600)
        listener.listen(128)
        listener.setblocking(False)
        self.selector.register(listener, selectors.EVENT_READ)
        self.listener = listener

    def serve(self) -> None:
        idle_since = time.monotonic()
        while True:
            for key, _ in self.selector.select(0 if self.pending else 1.0):
                if key.fileobj is self.listener:
                    self._accept()
                else:
                    self._receive(self.clients[key.fileobj])  # type: ignore[index]
            batch = self._take() if self.pending else []
            if batch:
                self._write(batch)
            if self.clients or self.pending:
                idle_since = time.monotonic()
            elif time.monotonic() - idle_since > IDLE_EXIT_SECONDS:
                self._close()
                return

    def _close(self) -> None:
        """Stops listening, then lets the lock go: an smtpd that comes now starts a writer."""
        assert self.listener is not None
        self.selector.unregister(self.listener)
        self.listener.close()
        with contextlib.suppress(FileNotFoundError):
            self.socket_path.unlink()
        os.close(self.lock_fd)

    def _accept(self) -> None:
        assert self.listener is not None
        while True:
            try:
                sock, _ = self.listener.accept()
            except BlockingIOError:
                return
            creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
            _, uid, _ = struct.unpack("3i", creds)
            if uid != os.geteuid():
                logger.warning("refused a connection to the writer from uid %d", uid)
                sock.close()
                continue
            sock.setblocking(False)  # read only what select() says is there
            self.clients[sock] = _Client(sock)
            self.selector.register(sock, selectors.EVENT_READ)

    def _receive(self, client: _Client) -> None:
        try:
            got = client.sock.recv_into(self.chunk)
        except BlockingIOError:
            return
        except OSError:
            got = 0
        if not got:
            self._drop(client)
            return
        client.buffer += memoryview(self.chunk)[:got]
        while len(client.buffer) >= HEADER.size:
            size, request = HEADER.unpack_from(client.buffer)
            if len(client.buffer) < HEADER.size + size:
                break
            messages = pickle.loads(client.buffer[HEADER.size : HEADER.size + size])
            del client.buffer[: HEADER.size + size]
            if messages:
                self.pending.append(_Request(client, request, messages))
            else:
                self._answer(client, request, [])  # ready

    def _drop(self, client: _Client) -> None:
        """An smtpd went away: the requests of it that are not begun are dropped."""
        self.selector.unregister(client.sock)
        del self.clients[client.sock]
        client.sock.close()
        kept = [r for r in self.pending if r.client is not client]
        if dropped := len(self.pending) - len(kept):
            logger.warning("an smtpd went away; %d request(s) of it dropped", dropped)
        self.pending = collections.deque(kept)

    def _take(self) -> list[_Request]:
        batch = [self.pending.popleft()]
        count, size = len(batch[0].messages), batch[0].size
        while self.pending:
            nxt = self.pending[0]
            if count + len(nxt.messages) > MAX_BATCH_MESSAGES or size + nxt.size > MAX_BATCH_BYTES:
                break
            batch.append(self.pending.popleft())
            count, size = count + len(nxt.messages), size + nxt.size
        # An smtpd killed while its request waited here: its senders got no reply and will send
        # again, so the request is not written (its closed socket is all that is left of it).
        clients = {id(r.client): r.client for r in batch}
        dead = {key: client for key, client in clients.items() if not self._alive(client)}
        for client in dead.values():
            self._drop(client)
        return [r for r in batch if id(r.client) not in dead]

    @staticmethod
    def _alive(client: _Client) -> bool:
        try:
            return bool(client.sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT))
        except BlockingIOError:
            return True  # nothing to read: connected
        except OSError:
            return False

    def _write(self, batch: list[_Request]) -> None:
        from mail.smtpd.writer import _write

        messages = [m for request in batch for m in request.messages]
        outcomes: list[Any]
        try:
            outcomes = list(_write(messages))
        except Exception:
            if len(messages) == 1:
                logger.exception("a message could not be stored")
                outcomes = [self._reason()]
            else:
                logger.warning("a batch of %d failed; storing them one by one", len(messages))
                outcomes = [self._alone(m) for m in messages]
        start = 0
        for request in batch:
            end = start + len(request.messages)
            self._answer(request.client, request.id, outcomes[start:end])
            start = end

    @staticmethod
    def _reason() -> str:
        kind, error, _ = sys.exc_info()
        return f"{kind.__name__ if kind else 'Error'}: {error}"[:500]

    def _alone(self, message: Incoming) -> list[Receipt] | str:
        from mail.smtpd.writer import _write

        try:
            return _write([message])[0]
        except Exception:
            logger.exception("a message could not be stored")
            return self._reason()

    def _answer(self, client: _Client, request: int, outcome: list[Any]) -> None:
        if client.sock not in self.clients:
            return  # it went away while its batch was written
        frame = _frame(request, outcome)
        try:
            try:
                sent = client.sock.send(frame)  # an answer is small: it fits the buffer
            except BlockingIOError:
                sent = 0
            if sent < len(frame):
                client.sock.settimeout(10.0)  # what is left must go within this, or the smtpd
                client.sock.sendall(frame[sent:])  # is taken for stuck and dropped
                client.sock.setblocking(False)
        except OSError:
            self._drop(client)


def main(argv: list[str]) -> int:
    """``python -m mail.smtpd.shared SOCKET LOCK``: the writer process, started by an smtpd."""
    socket_path, lock_path = Path(argv[0]), Path(argv[1])
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    writer = HostWriter(socket_path, lock_path)
    if not writer.lock():
        return ANOTHER_WRITER
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    gc.collect()
    gc.freeze()  # start-up objects live forever: keep them out of full collections
    writer.listen()
    logger.info("shared writer %d listening on %s", os.getpid(), socket_path)
    writer.serve()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

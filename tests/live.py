"""Real processes for end-to-end tests, on 127.0.0.1, against the test database. Tests using them
need ``transactional_db`` (committed data).

The suite runs in two configurations (see docs/testing.md). With PostgreSQL and Redis
(production), :class:`Stack` is ``manage.py smtpd`` and daphne as separate processes; in embedded
mode (a SQLite ``DATABASE_URL`` and no ``REDIS_URL``) it is the one ``manage.py serve`` process that
``make run`` starts, serving HTTP, SMTP and the periodic jobs, and ``stack.web`` and ``stack.smtp``
are that same process: killing one kills both, as it would in embedded mode.
"""

from __future__ import annotations

import collections
import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import httpx

ROOT = Path(__file__).resolve().parent.parent
# A Celery worker of the project, quiet and alone (no gossip, mingle or heartbeat to wait for).
CELERY_WORKER = [
    sys.executable,
    "-m",
    "celery",
    "-A",
    "config",
    "worker",
    "--pool",
    "solo",
    "--loglevel",
    "WARNING",
    "--without-heartbeat",
    "--without-gossip",
    "--without-mingle",
]


def embedded() -> bool:
    """True when the suite runs in the embedded configuration (SQLite, no Redis)."""
    return os.environ.get("DATABASE_URL", "").startswith("sqlite") and not os.environ.get(
        "REDIS_URL"
    )


def descendants(pid: int) -> list[int]:
    """The pids of ``pid``'s children and their children (a Celery worker's pool, an smtpd's writer process)."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parents.setdefault(int(stat[stat.rindex(")") + 2 :].split()[1]), []).append(
                int(entry.name)
            )
    found, todo = [], [pid]
    while todo:
        children = parents.get(todo.pop(), [])
        found += children
        todo += children
    return found


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_port(port: int, proc: subprocess.Popen, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"process exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise TimeoutError(f"port {port} did not open")


def _listening_inodes(port: int) -> set[str]:
    """Socket inodes listening on ``127.0.0.1:port`` (/proc/net/tcp, state 0A)."""
    wanted = f"0100007F:{port:04X}"
    inodes = set()
    with open("/proc/net/tcp") as table:
        next(table)
        for line in table:
            fields = line.split()
            if fields[1] == wanted and fields[3] == "0A":
                inodes.add(fields[9])
    return inodes


def wait_listening(proc: subprocess.Popen, port: int, timeout: float = 60) -> None:
    """Until ``proc`` itself listens on ``port`` (not another process sharing it with
    ``SO_REUSEPORT``, as the smtpds of the fault scenarios do): its own descriptors hold one of
    the port's listening sockets."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"process exited with {proc.returncode}")
        inodes = _listening_inodes(port)
        fds = Path(f"/proc/{proc.pid}/fd")
        with contextlib.suppress(OSError):
            for fd in fds.iterdir():
                with contextlib.suppress(OSError):
                    target = os.readlink(fd)
                    if target.startswith("socket:[") and target[8:-1] in inodes:
                        return
        time.sleep(0.05)
    raise TimeoutError(f"process {proc.pid} did not listen on port {port}")


def drain(stream: IO[bytes], into: collections.deque[str]) -> threading.Thread:
    """Reads a child's stderr into ``into`` (its last lines) in a thread, so a chatty process
    never blocks on a full pipe (64 KiB of tracebacks stopped an smtpd mid-reply once)."""

    def run() -> None:
        for line in iter(stream.readline, b""):
            into.append(line.decode("utf-8", "replace").rstrip())

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


class Process:
    """One child process of the project, restartable; ``logs`` holds its last stderr lines."""

    def __init__(
        self, argv: list[str], port: int, env: dict[str, str], also: tuple[int, ...] = ()
    ) -> None:
        self.argv, self.port, self.env = argv, port, env
        self.also = also  # further ports the process opens before it is ready
        self.proc: subprocess.Popen | None = None
        self.logs: collections.deque[str] = collections.deque(maxlen=500)

    def start(self) -> Process:
        self.proc = subprocess.Popen(
            self.argv, cwd=ROOT, env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        assert self.proc.stderr is not None
        drain(self.proc.stderr, self.logs)
        try:
            for port in (self.port, *self.also):
                _wait_port(port, self.proc)
        except BaseException:  # never leave a half-started child behind
            self.stop(signal.SIGKILL)
            raise
        return self

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.proc = None

    def restart(self) -> None:
        self.stop(signal.SIGKILL)
        self.start()


def child_env(database_name: str) -> dict[str, str]:
    env = dict(os.environ)
    if embedded():  # database_name is the test database's absolute path
        env["DATABASE_URL"] = f"sqlite:///{database_name}"
        env.pop("REDIS_URL", None)
    else:
        base = env.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/pigeonhole")
        env["DATABASE_URL"] = base.rsplit("/", 1)[0] + "/" + database_name
        env.setdefault("REDIS_URL", "redis://127.0.0.1:6379/0")
    env["CONN_MAX_AGE"] = "0"
    env.setdefault("CELERY_TASK_ALWAYS_EAGER", "true")
    env["PYTHONUNBUFFERED"] = "1"
    return env


class Stack:
    """An SMTP receiver and a web process: separate processes in production, the one
    ``manage.py serve`` in embedded mode."""

    def __init__(self, database_name: str) -> None:
        env = child_env(database_name)
        self.env = env
        self.smtp_port, self.http_port = free_port(), free_port()
        if embedded():
            # Under the network guard of tests.security.schema_server: its periodic jobs would
            # otherwise deliver the webhooks of test data (https://hooks.example.com/...) for real.
            serve = [sys.executable, "-m", "tests.security.schema_server", "serve"]
            serve += ["--host", "127.0.0.1"]
            serve += ["--port", str(self.http_port), "--smtp-host", "127.0.0.1"]
            serve += ["--smtp-port", str(self.smtp_port)]
            self.web = self.smtp = Process(serve, self.http_port, env, also=(self.smtp_port,))
            return
        self.smtp = Process(
            [
                sys.executable,
                "manage.py",
                "smtpd",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.smtp_port),
            ],
            self.smtp_port,
            env,
        )
        self.web = Process(
            [
                sys.executable,
                "-m",
                "config.web",
                "-b",
                "127.0.0.1",
                "-p",
                str(self.http_port),
                "config.asgi:application",
            ],
            self.http_port,
            env,
        )

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    def start(self) -> Stack:
        self.smtp.start()
        if self.web is not self.smtp:
            self.web.start()
        return self

    def stop(self) -> None:
        self.web.stop()
        self.smtp.stop()

    def client(self, key: str) -> httpx.Client:
        return httpx.Client(
            base_url=self.base_url + "/api/v1",
            headers={"Authorization": f"Bearer {key}"},
            timeout=httpx.Timeout(150, connect=5),
        )


@contextlib.contextmanager
def signed_in(base_url: str, email: str, password: str) -> Iterator[httpx.Client]:
    """A dashboard session signed in through ``/login/`` on a live server, sending its CSRF
    token (the decision endpoint takes a session, never a key)."""
    with httpx.Client(base_url=base_url, timeout=httpx.Timeout(60, connect=5)) as client:
        client.get("/login/").raise_for_status()
        response = client.post(
            "/login/",
            data={
                "username": email,
                "password": password,
                "csrfmiddlewaretoken": client.cookies["csrftoken"],
            },
        )
        assert response.status_code == 302, response.text[:300]
        client.headers["X-CSRFToken"] = client.cookies["csrftoken"]  # rotated at sign-in
        yield client


def sse_events(response: httpx.Response) -> Iterator[dict]:
    """Parses a text/event-stream response into ``{id, event, data}`` dicts (comments skipped)."""
    import json

    current: dict = {}
    for line in response.iter_lines():
        if line == "":
            if "data" in current:
                current["data"] = json.loads(current["data"])
                yield current
            current = {}
        elif line.startswith(":"):
            continue
        else:
            name, _, value = line.partition(":")
            current[name] = value[1:] if value.startswith(" ") else value

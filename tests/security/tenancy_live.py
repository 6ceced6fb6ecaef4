"""The live processes of the security matrices: ``manage.py smtpd``, daphne and a Celery worker
against the test database, as separate processes (``tests.live``), with jobs going through Redis
to the worker (not run eagerly), webhooks allowed to target 127.0.0.1, logging at DEBUG and every
line of output kept (the secrets matrix reads all of it). In embedded mode it is the one
``manage.py serve`` process with jobs in-process. The session fixture is ``live_stack`` in
``tests/conftest.py``; tests using it need ``transactional_db``."""

from __future__ import annotations

import collections
import subprocess
import threading
import uuid
from typing import Any

import httpx

from tests.live import CELERY_WORKER, ROOT, Process, Stack, _wait_port, drain, embedded

LIVE_ENV = {
    "CELERY_TASK_ALWAYS_EAGER": "false",
    "WEBHOOK_ALLOW_PRIVATE_TARGETS": "true",
    "WEBHOOK_RETRY_SCHEDULE": "1,1",
    "WEBHOOK_TIMEOUT": "5",
    "LOG_LEVEL": "DEBUG",
    "RATE_LIMIT_PER_MINUTE": "1000000",
}


class LoggedProcess(Process):
    """A :class:`tests.live.Process` whose ``logs`` keep every line of stderr *and* stdout
    (daphne writes its access log there)."""

    def start(self) -> LoggedProcess:
        self.proc = subprocess.Popen(
            self.argv, cwd=ROOT, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        assert self.proc.stdout is not None and self.proc.stderr is not None
        drain(self.proc.stdout, self.logs)
        drain(self.proc.stderr, self.logs)
        for port in (self.port, *self.also):
            _wait_port(port, self.proc)
        return self


class LiveStack(Stack):
    """:class:`tests.live.Stack` plus a worker on a queue of its own."""

    def __init__(self, database_name: str) -> None:
        super().__init__(database_name)
        self.queue = f"security-{uuid.uuid4().hex[:8]}"  # parallel runs never share tasks
        self.env = self.web.env  # Stack gives both processes one environment
        self.env.update(LIVE_ENV, CELERY_QUEUE=self.queue)
        self.worker_logs: collections.deque[str] = collections.deque()
        self.worker: subprocess.Popen | None = None
        if embedded():  # one `manage.py serve`, jobs in-process: no worker to start
            self.env["CELERY_TASK_ALWAYS_EAGER"] = "true"
            self.web = self.smtp = LoggedProcess(
                self.web.argv, self.web.port, self.env, also=self.web.also
            )
            self.web.logs = collections.deque()
            return
        self.smtp = LoggedProcess(self.smtp.argv, self.smtp.port, self.env)
        self.web = LoggedProcess(self.web.argv, self.web.port, self.env)
        for process in (self.smtp, self.web):
            process.logs = collections.deque()  # every line, not the last 500

    def start(self) -> LiveStack:
        super().start()
        if embedded():
            return self
        argv = [*CELERY_WORKER]
        argv[argv.index("--loglevel") + 1] = "DEBUG"
        self.worker = subprocess.Popen(
            argv, cwd=ROOT, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        assert self.worker.stdout is not None and self.worker.stderr is not None
        drain(self.worker.stdout, self.worker_logs)
        drain(self.worker.stderr, self.worker_logs)
        return self

    def stop(self) -> None:
        if self.worker is not None and self.worker.poll() is None:
            self.worker.terminate()
            try:
                self.worker.wait(10)
            except subprocess.TimeoutExpired:
                self.worker.kill()
                self.worker.wait(10)
        super().stop()

    def output(self) -> list[str]:
        """Every line the three processes wrote so far (stderr, and stdout where it is not
        discarded: the web process's access log)."""
        processes = [self.smtp] if self.smtp is self.web else [self.smtp, self.web]
        return [line for process in processes for line in process.logs] + [*self.worker_logs]


class StreamReader(threading.Thread):
    """Follows an SSE stream in a thread: ``frames`` are its events (comments left out),
    ``connected`` is set once the first bytes arrived."""

    def __init__(self, base_url: str, path: str, key: str) -> None:
        super().__init__(daemon=True)
        self.client = httpx.Client(
            base_url=base_url,
            headers={"Authorization": f"Bearer {key}"},
            timeout=httpx.Timeout(None, connect=5),
        )
        self.path = path
        self.status = 0
        self.frames: list[dict[str, Any]] = []
        self.raw: list[str] = []
        self.connected = threading.Event()
        self.stopped = threading.Event()
        self._lock = threading.Lock()

    def run(self) -> None:
        import json

        try:
            with self.client.stream("GET", self.path) as response:
                self.status = response.status_code
                current: dict[str, Any] = {}
                for line in response.iter_lines():
                    if self.stopped.is_set():
                        return
                    self.connected.set()
                    self.raw.append(line)
                    if line.startswith(":"):
                        continue
                    if line == "":
                        if "data" in current:
                            current["data"] = json.loads(current["data"])
                            with self._lock:
                                self.frames.append(current)
                        current = {}
                        continue
                    name, _, value = line.partition(":")
                    current[name] = value.removeprefix(" ")
        except httpx.HTTPError:
            pass  # closed by stop()
        finally:
            self.connected.set()

    def count(self) -> int:
        with self._lock:
            return len(self.frames)

    def stop(self) -> None:
        self.stopped.set()
        self.client.close()

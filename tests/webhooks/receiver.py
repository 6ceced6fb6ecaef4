"""A real HTTP receiver on 127.0.0.1 for webhook tests: records every request, answers from a
script (status codes, delays, redirects), and notes overlapping requests per delivery id."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    started: float
    finished: float = 0.0


@dataclass
class Receiver:
    port: int = 0
    script: list[tuple[int, float]] = field(default_factory=list)  # (status, delay) per request
    default: tuple[int, float] = (200, 0.0)
    requests: list[Received] = field(default_factory=list)
    overlaps: int = 0
    _active: dict[str, int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _arrived: threading.Condition = field(default_factory=threading.Condition)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    def wait_for(self, count: int, timeout: float = 20) -> list[Received]:
        with self._arrived:
            assert self._arrived.wait_for(lambda: len(self.requests) >= count, timeout), (
                f"{len(self.requests)} of {count} requests arrived"
            )
        return self.requests


def _handler(receiver: Receiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            record = Received(self.path, dict(self.headers.items()), body, time.monotonic())
            delivery = self.headers.get("Service-Delivery", "")
            with receiver._lock:
                if receiver._active.get(delivery):
                    receiver.overlaps += 1
                receiver._active[delivery] = receiver._active.get(delivery, 0) + 1
                status, delay = receiver.script.pop(0) if receiver.script else receiver.default
            with receiver._arrived:
                receiver.requests.append(record)
                receiver._arrived.notify_all()
            try:
                time.sleep(delay)
                self.send_response(status)
                if 300 <= status < 400:
                    self.send_header("Location", f"http://127.0.0.1:{receiver.port}/elsewhere")
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")
            except OSError:
                pass  # the sender gave up
            finally:
                record.finished = time.monotonic()
                with receiver._lock:
                    receiver._active[delivery] -= 1

    return Handler


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    state = Receiver()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    server.daemon_threads = True
    state.port = server.server_address[1]
    # shutdown() waits for serve_forever's next poll: 0.5 s by default, half a second at the end
    # of every webhook test.
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    yield state
    server.shutdown()
    server.server_close()

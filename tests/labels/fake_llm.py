"""A small real chat-completions server on 127.0.0.1 for classifier tests.

It records every request and answers from a queue of replies (the last one repeats), each a
:class:`Reply` with a status, a body (a dict is sent as JSON, str/bytes as they are) and an optional
delay. Use :func:`completion` and :func:`token` to build OpenAI-shaped bodies.
"""

from __future__ import annotations

import json
import math
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    body: dict[str, Any] | str | bytes = ""
    status: int = 200
    delay: float = 0.0  # seconds to stall before answering (cut short when the server stops)


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]  # lower-cased names
    body: Any  # the parsed JSON body, or the raw text when it isn't JSON


@dataclass
class FakeLLM:
    replies: list[Reply] = field(default_factory=lambda: [Reply(completion("yes"))])
    requests: list[Recorded] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:  # quiet
                pass

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    body: Any = json.loads(raw)
                except ValueError:
                    body = raw.decode("utf-8", "replace")
                with fake._lock:
                    fake.requests.append(
                        Recorded(
                            "POST", self.path, {k.lower(): v for k, v in self.headers.items()}, body
                        )
                    )
                    reply = fake.replies.pop(0) if len(fake.replies) > 1 else fake.replies[0]
                if reply.delay and fake._stopping.wait(reply.delay):
                    return
                payload = reply.body
                if isinstance(payload, dict):
                    payload = json.dumps(payload)
                data = payload.encode() if isinstance(payload, str) else payload
                try:
                    self.send_response(reply.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:  # the client gave up (e.g. timed out)
                    pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def url(self) -> str:
        return self.base_url + "/v1"

    def reply(self, *replies: Reply) -> None:
        with self._lock:
            self.replies[:] = list(replies)

    def start(self) -> FakeLLM:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


def token(text: str, p: float, top: dict[str, float] | None = None) -> dict[str, Any]:
    """One ``logprobs.content`` entry: the generated token with probability ``p`` and its
    top alternatives (``{token: probability}``, the generated one included if listed)."""
    entry: dict[str, Any] = {"token": text, "logprob": math.log(p), "bytes": list(text.encode())}
    if top is not None:
        entry["top_logprobs"] = [
            {"token": t, "logprob": math.log(q), "bytes": list(t.encode())} for t, q in top.items()
        ]
    return entry


def completion(content: str | None, logprobs: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """An OpenAI chat-completions body with one choice (``logprobs`` as ``content`` entries)."""
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 0,
        "model": "test-model",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "logprobs": {"content": logprobs} if logprobs is not None else None,
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }

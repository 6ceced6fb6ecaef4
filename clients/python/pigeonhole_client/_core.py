"""What the sync and the async client share: configuration, building a request from an
:class:`~pigeonhole_client.operations.Operation`, the retry policy, and the SSE parser.

Kept free of I/O so both transports apply exactly the same rules.
"""

from __future__ import annotations

import json
import logging
import os
import random
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Union

import httpx

from .errors import ConfigurationError, retry_after
from .models import Event
from .operations import OPERATIONS, Operation

logger = logging.getLogger("pigeonhole_client")

DEFAULT_TIMEOUT = 30.0
MAX_SERVER_WAIT = 120  # seconds: the server's cap on one GET …/wait
USER_AGENT = "pigeonhole-client/0.1"

Since = Union[datetime, str, None]


@dataclass
class Config:
    """Where the API is and how hard to try: the instance root (``PIGEONHOLE_URL``, e.g.
    ``http://127.0.0.1:8000``), the key (``PIGEONHOLE_API_KEY``), the per-request timeout and
    the retry budget (attempts after the first; backoff doubles from ``backoff`` seconds, and a
    ``Retry-After`` is honoured up to ``max_retry_wait`` seconds)."""

    base_url: str
    api_key: str
    timeout: float = DEFAULT_TIMEOUT
    max_retries: int = 3
    backoff: float = 0.5
    max_retry_wait: float = 60.0
    # The longest single long-poll asked of the server (its cap is 120 s); a longer wait is
    # several of them with the same ``since``.
    max_server_wait: int = MAX_SERVER_WAIT

    @classmethod
    def resolve(
        cls,
        base_url: str | None,
        api_key: str | None,
        **options: Any,
    ) -> Config:
        url = base_url or os.environ.get("PIGEONHOLE_URL", "")
        key = api_key or os.environ.get("PIGEONHOLE_API_KEY", "")
        if not url:
            raise ConfigurationError(
                "No server URL: pass base_url= or set PIGEONHOLE_URL (e.g. http://127.0.0.1:8000)",
                code="configuration",
            )
        if not key:
            raise ConfigurationError(
                "No API key: pass api_key= or set PIGEONHOLE_API_KEY", code="configuration"
            )
        url = url.rstrip("/")
        if url.endswith("/api/v1"):  # the API root is accepted as well as the instance root
            url = url[: -len("/api/v1")]
        return cls(base_url=url, api_key=key, **{k: v for k, v in options.items() if v is not None})

    @property
    def api_root(self) -> str:
        return self.base_url + "/api/v1"

    def headers(self) -> dict[str, str]:
        return {
            "Authorization": f"Bearer {self.api_key}",
            "Accept": "application/json",
            "User-Agent": USER_AGENT,
        }

    def delay(self, attempt: int, response: httpx.Response | None = None) -> float:
        """Seconds before retry number ``attempt`` (0-based): the server's ``Retry-After`` when
        it gave one, else exponential backoff with jitter."""
        if response is not None:
            told = retry_after(response)
            if told is not None:
                return min(told, self.max_retry_wait)
        base = self.backoff * (2**attempt)
        return min(base + random.uniform(0, base / 2), self.max_retry_wait)


def _value(value: Any) -> Any:
    """A query value as the API reads it (booleans as true/false, datetimes as ISO 8601)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime):
        return iso(value)
    return value


def iso(when: datetime) -> str:
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return when.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")


def since_value(since: Since) -> str | None:
    if since is None or isinstance(since, str):
        return since
    return iso(since)


@dataclass
class Call:
    """One request of an operation, checked against the operation's declaration."""

    op: Operation
    path: str
    params: dict[str, Any]
    headers: dict[str, str]
    body: dict[str, Any] | None

    @property
    def method(self) -> str:
        return self.op.method


def build(
    name: str,
    path_params: dict[str, str] | None = None,
    *,
    query: dict[str, Any] | None = None,
    body: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
) -> Call:
    """The :class:`Call` of operation ``name``; a parameter or field the operation does not
    declare is a ``TypeError`` here, before anything is sent (omitted values: ``None``)."""
    op = OPERATIONS[name]
    path_params = path_params or {}
    if set(path_params) != set(op.path_params):
        raise TypeError(f"{name}: path parameters {sorted(op.path_params)} expected")
    params = {k: _value(v) for k, v in (query or {}).items() if v is not None}
    unknown = set(params) - op.query
    if unknown:
        raise TypeError(f"{name} takes no query parameter {sorted(unknown)}")
    sent_headers = {k: v for k, v in (headers or {}).items() if v is not None}
    if set(sent_headers) - op.headers:
        raise TypeError(f"{name} takes no header {sorted(set(sent_headers) - op.headers)}")
    if body is not None:
        if op.body is None:
            raise TypeError(f"{name} takes no body")
        body = {k: v for k, v in body.items() if v is not None}
        if set(body) - op.body:
            raise TypeError(f"{name} takes no field {sorted(set(body) - op.body)}")
    elif op.body is not None and op.method in {"POST", "PATCH"}:
        body = {}
    if "Idempotency-Key" in op.headers and "Idempotency-Key" not in sent_headers:
        # One key per logical send, reused by every retry of it: the server answers a repeat
        # with the item it made the first time instead of mailing again.
        sent_headers["Idempotency-Key"] = f"pgh-client-{uuid.uuid4()}"
    from urllib.parse import quote

    path = op.path.format(**{k: quote(str(v), safe="@+") for k, v in path_params.items()})
    return Call(op=op, path=path, params=params, headers=sent_headers, body=body)


def retryable_exception(call: Call, exc: Exception) -> bool:
    """A transport failure worth another attempt: any call whose request never left (the
    connection was refused), and idempotent calls after a dropped connection or a read
    timeout."""
    if isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout)):
        return True
    return call.op.idempotent and isinstance(exc, httpx.TransportError)


def log_retry(call: Call, attempt: int, delay: float, why: str) -> None:
    logger.warning(
        "pigeonhole: %s %s: %s; retry %d in %.1f s", call.method, call.path, why, attempt, delay
    )


class SseParser:
    """The incremental form of :func:`sse_events`: feed lines, collect finished events (so the
    caller can remember each event's id before it reads the next line)."""

    def __init__(self) -> None:
        self.fields: dict[str, str] = {}
        self.data: list[str] = []

    def feed(self, line: str) -> Event | None:
        if line == "":
            event = None
            if self.data:
                raw = "\n".join(self.data)
                try:
                    payload = json.loads(raw)
                except ValueError:
                    payload = {"raw": raw}
                event = Event(
                    id=self.fields.get("id"),
                    event=self.fields.get("event", "message"),
                    data=payload if isinstance(payload, dict) else {"value": payload},
                )
            self.fields, self.data = {}, []
            return event
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "data":
            self.data.append(value)
        else:
            self.fields[name] = value
        return None


def stream_timeout(read: float) -> httpx.Timeout:
    """A stream's timeouts: the server sends a keep-alive every 15 s, so no byte for ``read``
    seconds means the connection is dead and worth reopening."""
    return httpx.Timeout(10.0, read=read)


def wait_timeout(seconds: int) -> httpx.Timeout:
    """One long-poll's timeouts: the server holds the request up to ``seconds``."""
    return httpx.Timeout(10.0, read=seconds + 30.0)

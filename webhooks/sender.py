"""One HTTP attempt of a delivery: connect to the checked address, never follow redirects,
give up after ``WEBHOOK_TIMEOUT`` seconds in all, keep a bounded excerpt of the answer.

The deadline is total: a receiver that trickles its answer a byte a second resets any per-read
timeout forever, so the whole exchange runs as one asyncio task cancelled at the deadline.
"""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from config.tls import client_context
from webhooks.targets import Target, TargetRefused, resolve

# httpx is imported by the functions that send: every process imports this module (the webhook
# fan-out is an events hook, registered at start-up), and httpx (with the command-line tool's
# libraries it loads) was a tenth of a second of the start of processes that send nothing, the
# smtpd's among them.

USER_AGENT = "Pigeonhole-Webhooks/1.0"
EXCERPT_BYTES = 1000


@dataclass(frozen=True)
class Outcome:
    status_code: int | None
    duration_ms: int
    error: str = ""
    excerpt: str = ""

    @property
    def succeeded(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300


def post(
    url: str, body: bytes, headers: dict[str, str], *, deadline: float | None = None
) -> Outcome:
    """Sends the attempt; gives up ``deadline`` seconds (default ``WEBHOOK_TIMEOUT``) after the
    start, whatever the receiver is doing by then."""
    import httpx

    started = time.monotonic()
    limit = settings.WEBHOOK_TIMEOUT if deadline is None else deadline

    def elapsed() -> int:
        return int((time.monotonic() - started) * 1000)

    try:
        target = resolve(url)
    except TargetRefused as exc:
        return Outcome(None, elapsed(), f"refused: {exc}")
    remaining = max(0.0, limit - (time.monotonic() - started))
    try:
        status, location, excerpt = _run(
            asyncio.wait_for(_exchange(target, body, headers, remaining), remaining)
        )
    except (TimeoutError, httpx.TimeoutException):
        return Outcome(None, elapsed(), f"timeout after {limit:g} s")
    except httpx.HTTPError as exc:
        return Outcome(None, elapsed(), f"{type(exc).__name__}: {exc}"[:500])
    text = excerpt[:EXCERPT_BYTES].decode("utf-8", "replace")
    error = ""
    if 300 <= status < 400:
        error = f"redirect to {location or '?'} not followed"[:500]
    elif not 200 <= status < 300:
        error = f"HTTP {status}"
    return Outcome(status, elapsed(), error, text)


_local = threading.local()


def _runner() -> asyncio.Runner:
    """This thread's event loop for attempts, kept between them (a new loop per attempt, as
    ``asyncio.run`` makes, was a measurable part of a webhook worker's time per delivery, spent
    on nothing the delivery needs)."""
    runner = getattr(_local, "runner", None)
    if runner is None:
        runner = _local.runner = asyncio.Runner()
    return runner


def _run(coroutine: Any) -> Any:
    """Runs ``coroutine`` to the end on this thread's loop for attempts (in a thread of its own
    when the caller's thread already runs a loop, as in embedded mode)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return _runner().run(coroutine)
    with ThreadPoolExecutor(1) as executor:
        return executor.submit(asyncio.run, coroutine).result()


async def _exchange(
    target: Target, body: bytes, headers: dict[str, str], timeout: float
) -> tuple[int, str, bytes]:
    """The request to the checked address, and the status, ``Location`` and the first
    ``EXCERPT_BYTES`` of the answer."""
    host = f"[{target.address}]" if ":" in target.address else target.address
    default_port = 443 if target.scheme == "https" else 80
    name = f"[{target.host}]" if ":" in target.host else target.host  # an IPv6 literal
    host_header = name if target.port == default_port else f"{name}:{target.port}"
    import httpx

    extensions = {"sni_hostname": target.host} if target.scheme == "https" else {}
    request_headers = {
        **headers,
        "Host": host_header,
        "User-Agent": USER_AGENT,
        "Content-Type": "application/json",
    }
    async with httpx.AsyncClient(
        timeout=httpx.Timeout(timeout),
        follow_redirects=False,
        trust_env=False,
        verify=client_context(),
    ) as client:
        request = client.build_request(
            "POST",
            f"{target.scheme}://{host}:{target.port}{target.path}",
            content=body,
            headers=request_headers,
            extensions=extensions,
        )
        response = await client.send(request, stream=True)
        try:
            excerpt = b""
            async for chunk in response.aiter_bytes():
                excerpt += chunk
                if len(excerpt) >= EXCERPT_BYTES:
                    break
        finally:
            await response.aclose()
    return response.status_code, response.headers.get("location", ""), excerpt

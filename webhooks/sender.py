"""One HTTP attempt of a delivery: connect to the checked address, never follow redirects,
give up after ``WEBHOOK_TIMEOUT`` seconds, keep a bounded excerpt of the answer."""

from __future__ import annotations

import functools
import ssl
import time
from dataclasses import dataclass

import httpx
from django.conf import settings

from webhooks.targets import TargetRefused, resolve

USER_AGENT = "Pigeonhole-Webhooks/1.0"
EXCERPT_BYTES = 1000


@functools.cache
def _tls() -> ssl.SSLContext:
    """One verifying TLS context per process: loading the CA bundle costs ~80 ms a time."""
    return httpx.create_ssl_context()


@dataclass(frozen=True)
class Outcome:
    status_code: int | None
    duration_ms: int
    error: str = ""
    excerpt: str = ""

    @property
    def succeeded(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300


def post(url: str, body: bytes, headers: dict[str, str]) -> Outcome:
    started = time.monotonic()

    def elapsed() -> int:
        return int((time.monotonic() - started) * 1000)

    try:
        target = resolve(url)
    except TargetRefused as exc:
        return Outcome(None, elapsed(), f"refused: {exc}")
    host = f"[{target.address}]" if ":" in target.address else target.address
    default_port = 443 if target.scheme == "https" else 80
    name = f"[{target.host}]" if ":" in target.host else target.host  # an IPv6 literal
    host_header = name if target.port == default_port else f"{name}:{target.port}"
    extensions = {"sni_hostname": target.host} if target.scheme == "https" else {}
    request_headers = {
        **headers,
        "Host": host_header,
        "User-Agent": USER_AGENT,
        "Content-Type": "application/json",
    }
    timeout = httpx.Timeout(settings.WEBHOOK_TIMEOUT)
    try:
        with httpx.Client(
            timeout=timeout, follow_redirects=False, trust_env=False, verify=_tls()
        ) as client:
            request = client.build_request(
                "POST",
                f"{target.scheme}://{host}:{target.port}{target.path}",
                content=body,
                headers=request_headers,
                extensions=extensions,
            )
            response = client.send(request, stream=True)
            try:
                excerpt = b""
                for chunk in response.iter_bytes():
                    excerpt += chunk
                    if len(excerpt) >= EXCERPT_BYTES:
                        break
            finally:
                response.close()
    except httpx.TimeoutException:
        return Outcome(None, elapsed(), f"timeout after {settings.WEBHOOK_TIMEOUT:g} s")
    except httpx.HTTPError as exc:
        return Outcome(None, elapsed(), f"{type(exc).__name__}: {exc}"[:500])
    text = excerpt[:EXCERPT_BYTES].decode("utf-8", "replace")
    error = ""
    if 300 <= response.status_code < 400:
        error = f"redirect to {response.headers.get('location', '?')} not followed"[:500]
    elif not 200 <= response.status_code < 300:
        error = f"HTTP {response.status_code}"
    return Outcome(response.status_code, elapsed(), error, text)

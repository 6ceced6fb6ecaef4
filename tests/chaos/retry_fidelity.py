"""Scenario 4 of the fault issue: retry schedule fidelity.

Three parts, each against real HTTP receivers on 127.0.0.1 and ``webhooks.services.attempt``,
the service workers run:

- **schedule** (injectable clock): deliveries to a receiver that always answers ``500``, with
  the default ``WEBHOOK_RETRY_SCHEDULE`` (10, 40, 180, 660, 2580 s). The clock passed to
  ``attempt(now=...)`` is moved to each delivery's stored ``next_attempt_at`` (the row is the
  truth); one second earlier the delivery must not be claimable. Exactly 6 attempts per
  delivery, each gap (from the end of a failed attempt to the start of the next) within ±20 % of
  its step of the schedule, then ``failed`` (and no 7th attempt however late the clock).
- **timeouts** (real clock): receivers that answer after 11 s, one sleeping before the status
  line and one trickling its body a byte a second (a per-read timeout would never fire): each
  attempt is logged as a timeout whose duration is 10 s ± 0.5 s (``WEBHOOK_TIMEOUT`` = 10).
- **redirects**: a receiver answering 301, 302, 303, 307 or 308 with ``Location`` on a second
  receiver that counts its hits: every attempt is a failure (logged with the 3xx), the
  deliveries end ``failed`` after 6 attempts, and the redirect target is never contacted.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from apikeys.audit import Actor

SCHEDULE = [10, 40, 180, 660, 2580]  # the default WEBHOOK_RETRY_SCHEDULE
BAND = 0.2  # allowed deviation of a gap from its step
TIMEOUT_S = 10.0
SLOW_S = 11.0
REDIRECTS = (301, 302, 303, 307, 308)


class Server:
    """A real HTTP server on 127.0.0.1 whose handler is ``answer(handler, hits)``."""

    def __init__(self, answer: Any) -> None:
        self.hits: Counter[str] = Counter()  # per Service-Delivery (or path)
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def _any(self) -> None:
                with server._lock:
                    server.hits[self.headers.get("Service-Delivery") or self.path] += 1
                self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with contextlib.suppress(OSError):  # the sender gave up
                    answer(self)

            do_POST = do_GET = _any

        class Threading(ThreadingHTTPServer):
            daemon_threads = True
            request_queue_size = 128

        self._server = Threading(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def total(self) -> int:
        with self._lock:
            return sum(self.hits.values())


def _fail(handler: BaseHTTPRequestHandler) -> None:
    handler.send_response(500)
    handler.send_header("Content-Length", "4")
    handler.end_headers()
    handler.wfile.write(b"nope")


def _sleep(handler: BaseHTTPRequestHandler) -> None:
    time.sleep(SLOW_S)
    handler.send_response(200)
    handler.send_header("Content-Length", "2")
    handler.end_headers()
    handler.wfile.write(b"ok")


def _trickle(handler: BaseHTTPRequestHandler) -> None:
    handler.send_response(200)
    handler.send_header("Content-Length", str(int(SLOW_S)))
    handler.end_headers()
    for _ in range(int(SLOW_S)):
        handler.wfile.write(b".")
        handler.wfile.flush()
        time.sleep(1.0)


def _redirect_to(target: str) -> Any:
    def answer(handler: BaseHTTPRequestHandler) -> None:
        code = int(handler.path.rsplit("/", 1)[-1])
        handler.send_response(code)
        handler.send_header("Location", f"{target}/landed")
        handler.send_header("Content-Length", "0")
        handler.end_headers()

    return answer


@dataclass
class Figures:
    failing: int  # deliveries to the always-failing receiver
    slow: int  # per kind of slow receiver (sleeping, trickling)
    redirected: int
    attempts: dict[int, int] = field(default_factory=dict)  # attempts per delivery → deliveries
    requests_seen: int = 0
    early_claims: int = 0  # attempts the row allowed before its next_attempt_at
    late_claims: int = 0  # attempts after ``failed``
    gaps: int = 0
    gaps_out_of_band: int = 0
    gap_ratio_min: float = 0.0
    gap_ratio_max: float = 0.0
    wrong_final: int = 0  # not failed after exactly 6 attempts
    timeouts_logged: int = 0
    timeouts_in_band: int = 0  # 10 s ± 0.5 s
    timeout_ms_min: int = 0
    timeout_ms_max: int = 0
    redirect_attempts: int = 0
    redirect_failures_logged: int = 0  # attempts logged with the 3xx and "not followed"
    redirect_target_hits: int = 0
    seconds: dict[str, float] = field(default_factory=dict)
    details: list[str] = field(default_factory=list)


def _emit(workspace_id: str, count: int, run_id: str, kind: str) -> None:
    from events import services as hub

    for start in range(0, count, 100):
        hub.emit_many(
            [
                hub.Change(workspace_id, "inbox.created", {"run": run_id, "kind": kind, "n": n})
                for n in range(start, min(count, start + 100))
            ]
        )


def _endpoint(workspace: Any, url: str) -> Any:
    from webhooks import services

    endpoint, _ = services.endpoint_create(
        workspace=workspace,
        url=url,
        events=["inbox.created"],
        inbox_ids=[],
        label_keys=[],
        by=Actor.system("tests"),
    )
    return endpoint


def _drive(delivery_ids: list[str], figures: Figures) -> None:
    """Attempts every delivery at the times its row names, with the injected clock, until it
    is finished; checks one second early is refused and a finished one is never attempted."""
    from webhooks import services
    from webhooks.models import Delivery

    for delivery_id in delivery_ids:
        row = Delivery.objects.get(pk=delivery_id)
        clock: datetime = row.next_attempt_at
        for _ in range(len(SCHEDULE) + 3):
            if services.attempt(delivery_id, now=clock - timedelta(seconds=1)) is not None:
                figures.early_claims += 1
                figures.details.append(f"{delivery_id}: attempted before {clock}")
            if services.attempt(delivery_id, now=clock) is None:
                figures.details.append(f"{delivery_id}: due at {clock} but not attempted")
                break
            row.refresh_from_db()
            if row.next_attempt_at is None:
                break
            clock = row.next_attempt_at
        far = clock + timedelta(days=365)
        if services.attempt(delivery_id, now=far) is not None:
            figures.late_claims += 1
            figures.details.append(f"{delivery_id}: attempted after it was {row.status}")


def _schedule_figures(delivery_ids: list[str], figures: Figures) -> None:
    from webhooks.models import Attempt, Delivery

    # (start, end) of each attempt: a step of the schedule runs from the end of the failed
    # attempt (its answer) to the start of the next.
    per_delivery: dict[str, list[tuple[datetime, datetime]]] = {d: [] for d in delivery_ids}
    for delivery_id, at, duration_ms in Attempt.objects.filter(
        delivery__in=delivery_ids
    ).values_list("delivery_id", "at", "duration_ms"):
        per_delivery[delivery_id].append((at, at + timedelta(milliseconds=duration_ms)))
    figures.attempts = dict(Counter(len(times) for times in per_delivery.values()))
    ratios = []
    for delivery_id, times in per_delivery.items():
        times.sort()
        for step, (a, b) in enumerate(itertools.pairwise(times)):
            if step >= len(SCHEDULE):
                break
            ratio = (b[0] - a[1]).total_seconds() / SCHEDULE[step]
            ratios.append(ratio)
            if abs(ratio - 1) > BAND:
                figures.gaps_out_of_band += 1
                figures.details.append(f"{delivery_id}: gap {step + 1} is {ratio:.3f}× its step")
    figures.gaps = len(ratios)
    if ratios:
        figures.gap_ratio_min, figures.gap_ratio_max = round(min(ratios), 3), round(max(ratios), 3)
    for row in Delivery.objects.filter(pk__in=delivery_ids):
        if row.status != "failed" or row.attempt_count != len(SCHEDULE) + 1:
            figures.wrong_final += 1
            figures.details.append(f"{row.pk}: {row.status} after {row.attempt_count} attempts")


def _timeouts(ids: list[str], figures: Figures) -> None:
    """One attempt of each slow delivery at once, on the real clock."""
    from django.db import connection

    from webhooks import services
    from webhooks.models import Attempt

    def one(delivery_id: str) -> None:
        try:
            services.attempt(delivery_id)
        finally:
            connection.close()

    # At most 8 at once: each holds a database connection for its 10 s (the pool has 10).
    with ThreadPoolExecutor(min(len(ids), 8)) as executor:
        list(executor.map(one, ids))
    durations = []
    for delivery_id, error, duration_ms, status_code in Attempt.objects.filter(
        delivery__in=ids
    ).values_list("delivery_id", "error", "duration_ms", "status_code"):
        if status_code is None and error == f"timeout after {TIMEOUT_S:g} s":
            figures.timeouts_logged += 1
            durations.append(duration_ms)
            if abs(duration_ms - TIMEOUT_S * 1000) <= 500:
                figures.timeouts_in_band += 1
            else:
                figures.details.append(f"{delivery_id}: timeout logged after {duration_ms} ms")
        else:
            figures.details.append(f"{delivery_id}: logged {status_code} {error!r}")
    if durations:
        figures.timeout_ms_min, figures.timeout_ms_max = min(durations), max(durations)


def run(database_name: str, *, failing: int, slow: int, redirected: int) -> Figures:
    """Runs the three parts (see the module docstring) with ``failing`` always-failing
    deliveries, ``slow`` deliveries to each slow receiver and ``redirected`` redirected ones."""
    from django.db import connection
    from django.test import override_settings

    from apikeys.services import workspace_get_or_create
    from config.celery import app
    from webhooks.models import Attempt, Delivery

    del database_name  # everything runs in this process, against its database
    run_id = uuid.uuid4().hex[:8]
    figures = Figures(failing=failing, slow=slow, redirected=redirected)
    target = Server(_fail)
    servers = {
        "failing": Server(_fail),
        "sleeping": Server(_sleep),
        "trickling": Server(_trickle),
        "redirecting": Server(_redirect_to(target.base)),
    }
    overrides = override_settings(
        WEBHOOK_ALLOW_PRIVATE_TARGETS=True,
        WEBHOOK_RETRY_SCHEDULE=SCHEDULE,
        WEBHOOK_TIMEOUT=TIMEOUT_S,
    )
    overrides.enable()
    previous = app.conf.task_always_eager
    app.conf.task_always_eager = True  # nothing is queued: this process attempts every delivery
    started = time.monotonic()
    try:
        workspace = workspace_get_or_create(name=f"chaos retries {run_id}")

        def made(kind: str, url: str, count: int) -> list[str]:
            endpoint = _endpoint(workspace, url)
            _emit(workspace.pk, count, run_id, kind)
            return list(Delivery.objects.filter(endpoint=endpoint).values_list("pk", flat=True))

        failing_ids = made("failing", f"{servers['failing'].base}/hook", failing)
        redirect_ids: list[str] = []
        for n in range(redirected):
            code = REDIRECTS[n % len(REDIRECTS)]
            redirect_ids += made("redirect", f"{servers['redirecting'].base}/{code}", 1)
        slow_ids = made("sleeping", f"{servers['sleeping'].base}/hook", slow)
        slow_ids += made("trickling", f"{servers['trickling'].base}/hook", slow)

        _timeouts(slow_ids, figures)
        figures.seconds["timeouts"] = round(time.monotonic() - started, 1)
        _drive(failing_ids, figures)
        _schedule_figures(failing_ids, figures)
        figures.requests_seen = servers["failing"].total()
        figures.seconds["schedule"] = round(time.monotonic() - started, 1)
        _drive(redirect_ids, figures)
        for status_code, error in Attempt.objects.filter(delivery__in=redirect_ids).values_list(
            "status_code", "error"
        ):
            figures.redirect_attempts += 1
            if status_code in REDIRECTS and error.endswith("not followed"):
                figures.redirect_failures_logged += 1
        for row in Delivery.objects.filter(pk__in=redirect_ids):
            if row.status != "failed" or row.attempt_count != len(SCHEDULE) + 1:
                figures.wrong_final += 1
                figures.details.append(f"{row.pk}: {row.status} after {row.attempt_count}")
        time.sleep(0.5)  # a follower would be on its way by now
        figures.redirect_target_hits = target.total()
    finally:
        app.conf.task_always_eager = previous
        overrides.disable()
        for server in (target, *servers.values()):
            server.stop()
        connection.close()
    figures.seconds["total"] = round(time.monotonic() - started, 1)
    return figures

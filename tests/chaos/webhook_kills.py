"""Scenario 3 of the fault issue: webhooks at least once, never twice at the same time.

Events are emitted (``events.services.emit_many``, in batches, at a steady rate) for one
endpoint whose URL is a real HTTP receiver on 127.0.0.1. The receiver answers ``500`` to the
first request of each delivery id and ``200`` to every later one, and tracks the requests in
flight per ``Service-Delivery``: a request that arrives while another of the same delivery is in
flight is an *overlap*. Real Celery worker processes deliver with a compressed retry schedule
(``WEBHOOK_RETRY_SCHEDULE=1,2,4,8,16``, ``WEBHOOK_TIMEOUT=3``: an 8 s lease); one of them, at
random, is ``kill -9``ed every 3 s and started again. A sweeper does what the beat schedule does
(``webhooks.sweep``: re-queues due deliveries whose task died with a worker, here after a 3 s
grace). The chaos runs until every event was emitted and at least ``min_kills`` workers were
killed (never by wall time alone: a loaded machine only makes the run longer).

Figures, from the receiver's own records and the database: deliveries with no answered ``2xx``
(``lost``), overlapping requests, deliveries still pending or retrying 30 s after the chaos
stopped and once the drain ended (no progress for ``stall_limit`` seconds, or none left), and
requests the receiver saw that are not an attempt in the delivery log (matched per delivery by
the signature's timestamp, which is the logged attempt's time in Unix seconds).
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from apikeys.audit import Actor
from tests.chaos.approval_gate import Workers, _purge
from tests.live import child_env

SCHEDULE = "1,2,4,8,16"


@dataclass
class Request:
    delivery: str
    t: int  # the signature's timestamp
    status: int
    answered: bool = False  # the answer was written without error


class Receiver:
    """A real HTTP server on 127.0.0.1: ``500`` to the first request of a delivery, ``200``
    after; counts overlapping requests of one delivery."""

    def __init__(self) -> None:
        self.requests: list[Request] = []
        self.overlaps: list[str] = []
        self.in_flight: Counter[str] = Counter()
        self.peak_in_flight = 0
        self._seen: set[str] = set()
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                delivery = self.headers.get("Service-Delivery", "")
                signature = self.headers.get("Service-Signature", "")
                with receiver._lock:
                    if receiver.in_flight[delivery]:
                        receiver.overlaps.append(delivery)
                    receiver.in_flight[delivery] += 1
                    receiver.peak_in_flight = max(
                        receiver.peak_in_flight, sum(receiver.in_flight.values())
                    )
                    status = 200 if delivery in receiver._seen else 500
                    receiver._seen.add(delivery)
                    t = int(signature.split(",")[0].removeprefix("t=") or 0)
                    request = Request(delivery, t, status)
                    receiver.requests.append(request)
                try:
                    self.rfile.read(int(self.headers.get("Content-Length", "0")))
                    self.send_response(status)
                    self.send_header("Content-Length", "2")
                    self.end_headers()
                    self.wfile.write(b"ok")
                    self.wfile.flush()
                    request.answered = True
                except OSError:
                    pass  # the worker died mid-request
                finally:
                    with receiver._lock:
                        receiver.in_flight[delivery] -= 1

        class Server(ThreadingHTTPServer):
            daemon_threads = True
            request_queue_size = 128

        self._server = Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/hook"
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    def start(self) -> Receiver:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def snapshot(self) -> list[Request]:
        with self._lock:
            return list(self.requests)


class Sweeper(threading.Thread):
    """What the beat schedule's ``webhooks.sweep`` does, every ``period`` seconds."""

    def __init__(self, period: float) -> None:
        super().__init__(daemon=True)
        self.period = period
        self.requeued = 0
        self._halt = threading.Event()

    def run(self) -> None:
        from django.db import connection

        from webhooks import services

        try:
            while not self._halt.wait(self.period):
                self.requeued += services.sweep()
        finally:
            connection.close()

    def stop(self) -> None:
        self._halt.set()
        if self.ident is not None:
            self.join(30)


@dataclass
class Figures:
    events: int
    deliveries: int = 0
    requests: int = 0  # every request the receiver saw
    answered_500: int = 0
    answered_2xx: int = 0
    unanswered: int = 0  # requests whose worker died before the answer was written
    lost: int = 0  # deliveries without an answered 2xx
    second_2xx: int = 0  # deliveries answered 2xx more than once (a kill before the record)
    overlaps: int = 0
    peak_in_flight: int = 0
    pending_after_30s: int | None = None  # None: the drain ended sooner (0 pending then)
    pending_at_end: int = 0
    statuses: dict[str, int] = field(default_factory=dict)
    attempts_logged: int = 0
    interrupted_attempts: int = 0
    unlogged_requests: int = 0  # requests with no matching attempt in the log
    kills: int = 0
    requeued_by_sweeper: int = 0
    seconds: dict[str, float] = field(default_factory=dict)
    details: list[str] = field(default_factory=list)


def run(
    database_name: str,
    *,
    events: int,
    rate: float = 20.0,
    batch: int = 10,
    workers: int = 3,
    kill_every: float = 3.0,
    min_kills: int = 3,
    sweep_every: float = 1.0,
    sweep_grace: float = 3.0,
    stall_limit: float = 60.0,
) -> Figures:
    """Runs the scenario against ``database_name`` with ``events`` events emitted at ``rate``
    per second while workers are killed; then drains (see the module docstring)."""
    from django.db import connection
    from django.test import override_settings

    from apikeys.services import workspace_get_or_create
    from config.celery import app
    from events import services as hub
    from webhooks import services
    from webhooks.models import Delivery, DeliveryStatus

    run_id = uuid.uuid4().hex[:8]
    queue = f"chaos-hooks-{run_id}"
    figures = Figures(events=events)
    receiver = Receiver().start()
    env = child_env(database_name)
    env.update(
        CELERY_TASK_ALWAYS_EAGER="false",
        CELERY_QUEUE=queue,
        WEBHOOK_ALLOW_PRIVATE_TARGETS="true",
        WEBHOOK_RETRY_SCHEDULE=SCHEDULE,
        WEBHOOK_TIMEOUT="3",
        TENANT_GUARD="true",
    )
    overrides = override_settings(
        WEBHOOK_ALLOW_PRIVATE_TARGETS=True,
        WEBHOOK_RETRY_SCHEDULE=[int(s) for s in SCHEDULE.split(",")],
        WEBHOOK_TIMEOUT=3.0,
        WEBHOOK_SWEEP_GRACE=sweep_grace,
    )
    overrides.enable()
    previous = (app.conf.task_always_eager, app.conf.task_default_queue)
    app.conf.task_always_eager, app.conf.task_default_queue = False, queue
    workspace = workspace_get_or_create(name=f"chaos hooks {run_id}")
    endpoint, _ = services.endpoint_create(
        workspace=workspace,
        url=receiver.url,
        events=["inbox.created"],
        inbox_ids=[],
        label_keys=[],
        by=Actor.system("tests"),
    )
    rows = Delivery.objects.filter(endpoint=endpoint)
    unfinished = rows.filter(status__in=[DeliveryStatus.PENDING, DeliveryStatus.RETRYING])
    pool = Workers(env, workers, kill_every)
    sweeper = Sweeper(sweep_every)
    started = time.monotonic()
    try:
        pool.start()
        sweeper.start()
        emitted = 0
        while emitted < events:
            size = min(batch, events - emitted)
            hub.emit_many(
                [
                    hub.Change(workspace.pk, "inbox.created", {"run": run_id, "seq": emitted + n})
                    for n in range(size)
                ]
            )
            emitted += size
            time.sleep(max(0.0, started + emitted / rate - time.monotonic()))
        figures.seconds["emitted"] = round(time.monotonic() - started, 1)
        pool.wait_for_kills(min_kills, limit=min_kills * kill_every + 60)
        pool.calm()
        calm_at = time.monotonic()
        figures.kills = pool.kills
        figures.seconds["chaos stopped"] = round(calm_at - started, 1)

        progress = (-1, time.monotonic())
        while time.monotonic() - progress[1] < stall_limit:
            left = unfinished.count()
            if figures.pending_after_30s is None and time.monotonic() - calm_at >= 30:
                figures.pending_after_30s = left
            if not left:
                break
            moved = len(receiver.snapshot())
            if moved > progress[0]:
                progress = (moved, time.monotonic())
            time.sleep(0.5)
        figures.seconds["drained"] = round(time.monotonic() - started, 1)
        time.sleep(1.0)  # the receiver's last answers
        sweeper.stop()
        pool.shutdown()
        figures.requeued_by_sweeper = sweeper.requeued
        figures.pending_at_end = unfinished.count()
        _check(rows, receiver, figures)
    finally:
        sweeper.stop()
        pool.shutdown()
        receiver.stop()
        app.conf.task_always_eager, app.conf.task_default_queue = previous
        overrides.disable()
        connection.close()
        with contextlib.suppress(Exception):
            _purge(queue)
    figures.seconds["total"] = round(time.monotonic() - started, 1)
    if (figures.details or figures.pending_at_end) and pool.logs:
        figures.details += [f"worker: {line}" for line in list(pool.logs)[-10:]]
    return figures


def _check(rows: object, receiver: Receiver, figures: Figures) -> None:
    from webhooks.models import Attempt
    from webhooks.services import IN_PROGRESS, INTERRUPTED

    deliveries = {d.pk: d.status for d in rows.only("id", "status")}  # type: ignore[attr-defined]
    figures.deliveries = len(deliveries)
    figures.statuses = dict(Counter(deliveries.values()))
    if figures.deliveries != figures.events:
        figures.details.append(f"{figures.events} events made {figures.deliveries} deliveries")
    requests = receiver.snapshot()
    figures.requests = len(requests)
    figures.overlaps = len(receiver.overlaps)
    figures.peak_in_flight = receiver.peak_in_flight
    for delivery in receiver.overlaps[:10]:
        figures.details.append(f"{delivery}: overlapping requests")
    answered: Counter[str] = Counter()
    seen: dict[str, Counter[int]] = defaultdict(Counter)
    for request in requests:
        seen[request.delivery][request.t] += 1
        if not request.answered:
            figures.unanswered += 1
        elif request.status == 200:
            figures.answered_2xx += 1
            answered[request.delivery] += 1
        else:
            figures.answered_500 += 1
    for delivery_id, status in deliveries.items():
        if not answered[delivery_id]:
            figures.lost += 1
            figures.details.append(f"{delivery_id} ({status}): no answered 2xx")
        elif answered[delivery_id] > 1:
            figures.second_2xx += 1
    unknown = set(seen) - set(deliveries)
    for delivery_id in unknown:
        figures.details.append(f"{delivery_id}: a request for a delivery not in the log")
    logged: dict[str, Counter[int]] = defaultdict(Counter)
    attempts = Attempt.objects.filter(delivery__in=list(deliveries)).values_list(
        "delivery_id", "at", "error"
    )
    for delivery_id, at, error in attempts:
        figures.attempts_logged += 1
        figures.interrupted_attempts += error in (INTERRUPTED, IN_PROGRESS)
        logged[delivery_id][int(at.timestamp())] += 1
    for delivery_id, times in seen.items():
        missing = times - logged[delivery_id]
        if missing:
            figures.unlogged_requests += sum(missing.values())
            figures.details.append(f"{delivery_id}: requests at t={sorted(missing)} not logged")

"""What one database call of the real-time paths costs the web process (``--calls``).

``mail.realtime`` does its database work in short sync calls wrapped for asyncio (whatever
wrapper it uses today: ``db_call`` in the thread pool, or Channels' ``database_sync_to_async``
on one shared thread). This times the same wrapped calls, one after another, in this process
with the web process's settings (PostgreSQL through the connection pool, Redis for the rate
limit): wall time per call and the CPU time this process spent on it. The
CPU part runs under the GIL, so it is what a web process cannot overlap with its event loop.

From those it derives the database-call load of scenario (a): the web process's hub re-reads the
log once every ``SWEEP_SECONDS`` for all parked waiters together (costed here as one ``_find``),
and every message costs ``_load`` for the answer, then the re-park's ``_open`` and ``_find``.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

from tests.benchmarks.clients import bench_message
from tests.benchmarks.database import Fixtures


def _scope(key: str, inbox_id: str) -> dict[str, Any]:
    return {
        "type": "http",
        "headers": [(b"authorization", f"Bearer {key}".encode())],
        "query_string": b"timeout=120",
        "url_route": {"kwargs": {"inbox_id": inbox_id}},
    }


async def _time(call: Callable[[], Awaitable[Any]], repeat: int) -> dict[str, float]:
    for _ in range(5):
        await call()  # warm: connections, caches, lazy imports
    walls = []
    cpu_started = time.process_time()
    for _ in range(repeat):
        started = time.perf_counter()
        await call()
        walls.append(time.perf_counter() - started)
    cpu = (time.process_time() - cpu_started) / repeat
    walls.sort()
    return {
        "median_ms": round(1000 * statistics.median(walls), 3),
        "p90_ms": round(1000 * walls[int(0.9 * (len(walls) - 1))], 3),
        "cpu_ms": round(1000 * cpu, 3),
    }


def deliver_one(fixtures: Fixtures) -> str:
    """Stores one message through the pipeline (sync; before the event loop starts)."""
    from mail.pipeline import receive_one

    _, address = fixtures.inboxes[-1]
    delivery = receive_one(bench_message(address, 1), to=address, mail_from="shop@bench.example")
    assert delivery.email_id is not None, delivery
    return delivery.email_id


async def measure(
    fixtures: Fixtures, email_id: str, *, repeat: int, waiters: int, rate: float
) -> dict:
    from asgiref.sync import sync_to_async
    from django.db import close_old_connections, connection
    from django.utils import timezone

    from config.patterns import Budget
    from events import hub
    from inboxes.models import Inbox
    from mail import realtime, waiting

    inbox_id, _ = fixtures.inboxes[-1]
    inbox = await sync_to_async(Inbox.objects.select_related("workspace").get)(pk=inbox_id)
    scope = _scope(fixtures.key, inbox_id)
    since = timezone.now() + timedelta(seconds=1)  # nothing after it: the poll's usual answer

    def fresh(fn: Callable[[], Any]) -> Callable[[], Any]:
        def run() -> Any:
            close_old_connections()
            try:
                return fn()
            finally:
                close_old_connections()

        return run

    def select_one() -> None:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")

    noop = sync_to_async(fresh(lambda: None), thread_sensitive=False)
    floor = sync_to_async(fresh(select_one), thread_sensitive=False)
    calls: dict[str, Callable[[], Awaitable[Any]]] = {
        "thread-pool hop + close_old_connections": noop,
        "the same + SELECT 1 (+ health check)": floor,
        "_open (key, rate limit, inbox)": lambda: realtime._open(
            scope, inbox_id, allow_query_token=False
        ),
        "_find (nothing new: park and safety poll)": lambda: waiting.find(
            inbox.workspace, inbox, since, {}, waiting.Progress(needed=1), Budget()
        ),
        "_load (email record for the answer)": lambda: waiting._records(
            inbox.workspace, [email_id], {}
        ),
        "_latest_event (stream open)": lambda: realtime._latest_event(inbox),
        "_events_after (stream catch-up)": lambda: realtime._events_after(inbox, 10**12),
    }
    timings = {name: await _time(call, repeat) for name, call in calls.items()}

    def cost(prefix: str, field: str) -> float:
        return next(v[field] for k, v in timings.items() if k.startswith(prefix))

    polls = 1 / hub.SWEEP_SECONDS
    model = {
        "waiters": waiters,
        "rate": rate,
        "poll_seconds": hub.SWEEP_SECONDS,
        "poll_calls_per_s": round(polls, 1),
        "message_calls_per_s": 3 * rate,
    }
    for field, label in (("median_ms", "wall"), ("cpu_ms", "cpu")):
        per_message = cost("_load", field) + cost("_open", field) + cost("_find", field)
        model[f"{label}_ms_per_message"] = round(per_message, 2)
        model[f"{label}_ms_per_s"] = round(polls * cost("_find", field) + rate * per_message, 1)
    return {"repeat": repeat, "calls": timings, "model_a": model}


def markdown(result: dict) -> str:
    model = result["model_a"]
    lines = [
        f"Database calls of mail.realtime, timed one at a time ({result['repeat']} each; "
        "cpu: this process's CPU per call):",
        "",
        "| call | median | p90 | cpu |",
        "|---|---:|---:|---:|",
    ]
    lines += [
        f"| {name} | {t['median_ms']:.2f} ms | {t['p90_ms']:.2f} ms | {t['cpu_ms']:.2f} ms |"
        for name, t in result["calls"].items()
    ]
    lines += [
        "",
        f"Scenario (a) at {model['waiters']:,} waiters (one sweep every {model['poll_seconds']:g} s) "
        f"and {model['rate']:g} msg/s: {model['poll_calls_per_s']:.0f} polls/s + "
        f"{model['message_calls_per_s']:.0f} calls/s for messages = "
        f"{model['wall_ms_per_s']:.0f} ms of database calls per second, "
        f"{model['cpu_ms_per_s']:.0f} ms of it CPU under the web process's GIL.",
    ]
    return "\n".join(lines)

"""Scale-out: several web, smtpd and worker processes on one PostgreSQL and one Redis
(``python -m tests.benchmarks.scaleout``; ``make bench`` runs it).

Two shapes, each in a workspace of its own on one benchmark database: 1 web + 1 smtpd + 1 worker,
then 2 web + 2 smtpd (one port, SO_REUSEPORT) + 2 workers. In each, ``--messages`` realistic
4 KB messages go over SMTP (10 clients, a new connection per message) to 50 inboxes, every tenth
to one watched inbox that an SSE client follows **on every web process**; one webhook endpoint
receives ``email.received`` at a receiver on 127.0.0.1 that records every request.

Checked exactly, per shape: every message acknowledged with ``250`` is stored once (by
Message-ID); one ``email.received`` event per email; one delivery per event, all succeeded;
every delivery id reached the receiver, none twice and never two at once; each stream saw every
event of the watched inbox exactly once. Measured: ingest msgs/s, the time until the last
delivery succeeded, and where the CPU went while the mail arrived (each process type, the
PostgreSQL backends, Redis, the load generator, and how busy the whole machine was): the
next bottleneck. Writes ``results/scaleout.{json,md}``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from http.server import ThreadingHTTPServer
from typing import Any

import httpx

from tests.benchmarks import database, ingest
from tests.benchmarks.stack import RESULTS, CpuWindow, child_env
from tests.live import CELERY_WORKER, ROOT, Process, descendants, free_port, sse_events
from tests.webhooks.receiver import Receiver, _handler

INBOXES = 50


class Shape:
    """Processes of one shape: ``webs`` daphne, ``smtps`` smtpd on one port, ``workers``."""

    def __init__(self, webs: int, smtps: int, workers: int, env: dict[str, str]) -> None:
        self.env = dict(env, CELERY_QUEUE=f"scaleout-{uuid.uuid4().hex[:8]}")
        # The shape's smtpds share a writer of their own (a child of the first: counted with it),
        # never one the previous shape's smtpds left running for its last seconds.
        self.env["SMTP_WRITER_DIR"] = tempfile.mkdtemp(prefix="pgh-bench-writer-")
        self.smtp_port = free_port()
        smtpd = [sys.executable, "manage.py", "smtpd", "--host", "127.0.0.1", "--port"]
        self.smtps = [
            Process([*smtpd, str(self.smtp_port)], self.smtp_port, self.env) for _ in range(smtps)
        ]
        self.webs = []
        for _ in range(webs):
            port = free_port()
            argv = [
                sys.executable,
                "-m",
                "config.web",
                "-b",
                "127.0.0.1",
                "-p",
                str(port),
                "config.asgi:application",
            ]
            self.webs.append(Process(argv, port, self.env))
        self.workers: list[subprocess.Popen] = []
        self.worker_count = workers

    def start(self) -> None:
        self.smtps[0].start()
        for extra in self.smtps[1:]:
            ingest._start_shared(extra)
        for web in self.webs:
            web.start()
        self.workers = [
            subprocess.Popen(
                [*CELERY_WORKER, "-n", f"so{i}-{uuid.uuid4().hex[:6]}@%h"],
                cwd=ROOT,
                env=self.env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            for i in range(self.worker_count)
        ]

    def stop(self) -> None:
        for process in (*self.webs, *self.smtps):
            process.stop()
        for worker in self.workers:
            worker.terminate()
        for worker in self.workers:
            try:
                worker.wait(20)
            except subprocess.TimeoutExpired:
                worker.kill()


def _cpu_pids(shape: Shape) -> dict[str, int]:
    """Every process of the shape and the load generator, named ``<type>.<n>``."""
    pids = {f"web.{n}": web.proc.pid for n, web in enumerate(shape.webs) if web.proc}
    smtpds = [  # each smtpd with its children: the first one's is the shape's shared writer
        pid for s in shape.smtps if s.proc for pid in (s.proc.pid, *descendants(s.proc.pid))
    ]
    pids |= {f"smtpd.{n}": pid for n, pid in enumerate(smtpds)}
    workers = [pid for w in shape.workers for pid in (w.pid, *descendants(w.pid))]
    pids |= {f"worker.{n}": pid for n, pid in enumerate(workers)}
    return pids | {"harness.0": os.getpid()}


def _by_type(window: dict[str, float]) -> dict[str, float]:
    """CPU per process type in % of one CPU (``web.0_cpu_pct`` + ``web.1_cpu_pct`` …)."""
    out: dict[str, float] = {}
    for key, value in window.items():
        if key.endswith("_cpu_pct"):
            kind = key.removesuffix("_cpu_pct").split(".")[0]
            out[kind] = round(out.get(kind, 0.0) + value, 1)
    out["machine_busy_pct"] = window.get("machine_busy_pct", 0.0)
    return out


def _follow(
    url: str, key: str, got: list[int], ready: threading.Event, stop: threading.Event
) -> None:
    try:
        with (
            httpx.Client(timeout=httpx.Timeout(None, connect=5)) as client,
            client.stream("GET", url, headers={"Authorization": f"Bearer {key}"}) as response,
        ):
            ready.set()
            for event in sse_events(response):
                if event["event"] == "email.received":
                    got.append(int(event["id"]))
                if stop.is_set():
                    return
    except httpx.HTTPError:
        pass  # the web process was stopped at the end of the shape


def run_shape(name: str, shape: Shape, messages: int, receiver: Receiver) -> dict[str, Any]:
    from apikeys.audit import Actor  # models: only once django.setup() ran
    from apikeys.services import ALL_SCOPES, api_key_create, workspace_get_or_create
    from events.models import Event
    from inboxes.services import inbox_create
    from mail.models import Email
    from webhooks import services as webhook_services
    from webhooks.models import Delivery

    workspace = workspace_get_or_create(name=f"scaleout {name}")
    key = api_key_create(
        workspace=workspace, name="so", scopes=ALL_SCOPES, by=Actor.system("tests")
    ).plain
    inboxes = [inbox_create(workspace=workspace, ttl_minutes=None) for _ in range(INBOXES)]
    watched = inboxes[0]
    webhook_services.endpoint_create(
        workspace=workspace,
        url=receiver.url,
        events=["email.received"],
        inbox_ids=[],
        label_keys=[],
        by=Actor.system("tests"),
    )
    shape.start()
    streams: list[list[int]] = []
    stop = threading.Event()
    threads = []
    for web in shape.webs:
        got: list[int] = []
        ready = threading.Event()
        url = f"http://127.0.0.1:{web.port}/api/v1/inboxes/{watched.pk}/stream"
        thread = threading.Thread(target=_follow, args=(url, key, got, ready, stop), daemon=True)
        thread.start()
        assert ready.wait(30), "stream did not open"
        streams.append(got)
        threads.append(thread)
    time.sleep(8)  # the workers finish starting before the load begins
    batch = []
    for n in range(messages):
        inbox = watched if n % 10 == 0 else random.choice(inboxes[1:])
        batch.append((inbox.address, ingest.realistic_4k(inbox.address, n)))
    window = CpuWindow(_cpu_pids(shape), database.BENCH_DB)
    started = time.perf_counter()
    load = asyncio.run(ingest.load(shape.smtp_port, batch, ingest.CLIENTS))
    ingest_s = time.perf_counter() - started
    cpu = _by_type(window.result())
    emails = Email.objects.filter(workspace=workspace)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        pending = Delivery.objects.filter(workspace_id=workspace.pk).exclude(status="succeeded")
        if (
            emails.count() >= load["ok"]
            and not pending.exists()
            and Delivery.objects.filter(workspace_id=workspace.pk).count() >= load["ok"]
        ):
            break
        time.sleep(0.2)
    delivered_s = time.perf_counter() - started
    time.sleep(2)  # the streams' last frames
    stop.set()
    shape.stop()
    received = Event.objects.filter(workspace_id=workspace.pk, type="email.received")
    watched_events = sorted(received.filter(inbox_id=watched.pk).values_list("id", flat=True))
    deliveries = Delivery.objects.filter(workspace_id=workspace.pk)
    ids = {d for d in deliveries.values_list("id", flat=True)}
    seen = Counter(r.headers.get("Service-Delivery", "") for r in receiver.requests)
    mine = {d: n for d, n in seen.items() if d in ids}
    message_ids = Counter(emails.values_list("message_id", flat=True))
    result = {
        "processes": {
            "web": len(shape.webs),
            "smtpd": len(shape.smtps),
            "worker": shape.worker_count,
        },
        "sent": messages,
        "acknowledged": load["ok"],
        "smtp_errors": load["errors"],
        "ingest_rate": round(load["ok"] / ingest_s, 1),
        "all_delivered_s": round(delivered_s, 1),
        "cpu_during_ingest": cpu,
        "stored": emails.count(),
        "stored_twice": sum(1 for n in message_ids.values() if n > 1),
        "events": received.count(),
        "events_distinct_emails": received.values("data__email__id").distinct().count(),
        "deliveries": deliveries.count(),
        "deliveries_succeeded": deliveries.filter(status="succeeded").count(),
        "deliveries_never_received": len(ids - set(mine)),
        "deliveries_received_twice": sum(1 for n in mine.values() if n > 1),
        "overlapping_requests": receiver.overlaps,
        "watched_events": len(watched_events),
        "streams": [
            {
                "got": len(got),
                "missing": len(set(watched_events) - set(got)),
                "twice": len(got) - len(set(got)),
            }
            for got in streams
        ],
    }
    result["exactly_once"] = (
        result["stored"]
        == result["acknowledged"]
        == result["events"]
        == result["deliveries"]
        == result["deliveries_succeeded"]
        == result["events_distinct_emails"]
        and result["stored_twice"] == 0
        and result["deliveries_never_received"] == 0
        and result["deliveries_received_twice"] == 0
        and result["overlapping_requests"] == 0
        and all(s["missing"] == 0 and s["twice"] == 0 for s in result["streams"])
    )
    return result


def markdown(results: dict[str, dict]) -> str:
    lines = [
        f"Scale-out, {time.strftime('%Y-%m-%d')}: realistic 4 KB messages over SMTP, one webhook "
        "endpoint, one SSE stream per web process on a watched inbox.",
        "",
        "| processes | sent | stored | events | deliveries ok | receiver: missing / twice | "
        "streams: missing / twice | exactly once | ingest | all delivered after |",
        "|---|---:|---:|---:|---:|---|---|:---:|---:|---:|",
    ]
    for name, r in results.items():
        streams = ", ".join(f"{s['missing']}/{s['twice']}" for s in r["streams"])
        lines.append(
            f"| {name} | {r['sent']} | {r['stored']} | {r['events']} | {r['deliveries_succeeded']} "
            f"| {r['deliveries_never_received']} / {r['deliveries_received_twice']} | {streams} "
            f"| {'yes' if r['exactly_once'] else '**no**'} | {r['ingest_rate']}/s "
            f"| {r['all_delivered_s']} s |"
        )
    kinds = ("smtpd", "postgres", "web", "worker", "redis", "harness", "other")
    lines += [
        "",
        "CPU while the mail arrived, in % of one CPU (the machine has "
        f"{os.cpu_count()}; `machine` is the busy share of all of them):",
        "",
        "| processes | " + " | ".join(kinds) + " | machine |",
        "|---|" + "---:|" * (len(kinds) + 1),
    ]
    for name, r in results.items():
        cpu = r["cpu_during_ingest"]
        cells = " | ".join(f"{cpu.get(kind, 0.0):.0f}" for kind in kinds)
        lines.append(f"| {name} | {cells} | {cpu['machine_busy_pct']:.0f} % |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=2000)
    args = parser.parse_args(argv)
    base_url = os.environ.get("DATABASE_URL") or database.DEFAULT_DATABASE_URL
    redis_url = os.environ.get("REDIS_URL") or database.DEFAULT_REDIS_URL
    bench_url = database.with_database(base_url, database.BENCH_DB)
    env = child_env(bench_url, redis_url)
    env.update(CELERY_TASK_ALWAYS_EAGER="false", WEBHOOK_ALLOW_PRIVATE_TARGETS="true")
    database.recreate(base_url)
    receiver = Receiver()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(receiver))
    server.daemon_threads = True
    receiver.port = server.server_address[1]
    threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    ).start()
    results: dict[str, dict] = {}
    try:
        database.migrate(env)
        database.setup_django(bench_url, redis_url, env["RATE_LIMIT_PER_MINUTE"])
        for name, (webs, smtps, workers) in {
            "1 web + 1 smtpd + 1 worker": (1, 1, 1),
            "2 web + 2 smtpd + 2 workers": (2, 2, 2),
        }.items():
            shape = Shape(webs, smtps, workers, env)
            try:
                results[name] = run_shape(name, shape, args.messages, receiver)
            finally:
                shape.stop()
            r = results[name]
            print(f"[scaleout] {name}: {json.dumps(r)}", flush=True)
    finally:
        server.shutdown()
        from django.db import connections

        connections.close_all()
        database.drop(base_url)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "scaleout.json").write_text(json.dumps(results, indent=2))
    text = markdown(results)
    (RESULTS / "scaleout.md").write_text(text + "\n")
    print(text)
    return 0 if all(r["exactly_once"] for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())

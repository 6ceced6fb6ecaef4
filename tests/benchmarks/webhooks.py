"""Webhook delivery throughput: deliveries per second to a receiver on 127.0.0.1 with 1 and 4
Celery worker processes (``python -m tests.benchmarks.webhooks``; ``make bench`` runs it).

Its own database (``pigeonhole_bench_webhooks``); the receiver is a threaded HTTP server in a
child process answering 200 at once; deliveries are queued through Redis exactly as the fan-out
does it; the figure is the number of deliveries over the time until the last one succeeded.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psycopg
from psycopg import sql

from tests.benchmarks.database import DEFAULT_DATABASE_URL, DEFAULT_REDIS_URL, with_database
from tests.live import CELERY_WORKER, ROOT, free_port

DB = "pigeonhole_bench_webhooks"
RESULTS = Path(__file__).parent / "results"
RECEIVER = """
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
class H(BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.send_response(200); self.send_header("Content-Length", "0"); self.end_headers()
ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"""


def _admin(url: str) -> psycopg.Connection:
    return psycopg.connect(with_database(url, "postgres"), autocommit=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--deliveries", type=int, default=1000)
    parser.add_argument("--workers", default="1,4")
    args = parser.parse_args(argv)
    base = os.environ.get("DATABASE_URL", DEFAULT_DATABASE_URL)
    redis_url = os.environ.get("REDIS_URL", DEFAULT_REDIS_URL)
    with _admin(base) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(DB)))
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(DB)))
    queue = f"bench-{uuid.uuid4().hex[:8]}"
    env = dict(
        os.environ,
        DATABASE_URL=with_database(base, DB),
        REDIS_URL=redis_url,
        CELERY_QUEUE=queue,
        CELERY_TASK_ALWAYS_EAGER="false",
        WEBHOOK_ALLOW_PRIVATE_TARGETS="true",
    )
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True)
    os.environ.update(env)
    os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings"
    import django

    django.setup()
    from apikeys.models import Workspace
    from config.celery import app
    from webhooks import services
    from webhooks.models import Delivery

    port = free_port()
    receiver = subprocess.Popen([sys.executable, "-c", RECEIVER, str(port)])
    results: dict[str, dict] = {}
    try:
        time.sleep(0.5)
        from apikeys.audit import Actor  # models: only once django.setup() ran

        workspace = Workspace.objects.create(name="bench")
        endpoint, _ = services.endpoint_create(
            workspace=workspace,
            url=f"http://127.0.0.1:{port}/hook",
            events=["inbox.created"],
            inbox_ids=[],
            label_keys=[],
            by=Actor.system("tests"),
        )
        app.conf.task_default_queue = queue
        for count in (int(n) for n in args.workers.split(",")):
            Delivery.objects.all().delete()
            ids = [services.send_test(endpoint=endpoint).pk for _ in range(args.deliveries)]
            workers = [
                subprocess.Popen(
                    [*CELERY_WORKER, "-n", f"bench{i}@%h"],
                    cwd=ROOT,
                    env=env,
                )
                for i in range(count)
            ]
            started = time.monotonic()
            deadline = started + 600
            done = 0
            while time.monotonic() < deadline:
                done = Delivery.objects.filter(status="succeeded").count()
                if done >= len(ids):
                    break
                time.sleep(0.05)
            elapsed = time.monotonic() - started
            for worker in workers:
                worker.terminate()
            for worker in workers:
                worker.wait(30)
            sent_twice = Delivery.objects.filter(attempts__isnull=False).count() - done
            results[f"{count} worker(s)"] = {
                "deliveries": len(ids),
                "succeeded": done,
                "seconds": round(elapsed, 2),
                "per_second": round(done / elapsed, 1),
                "extra_attempts": max(0, sent_twice),
            }
            print(
                f"{count} worker(s): {done} deliveries in {elapsed:.1f} s = {done / elapsed:.0f}/s",
                flush=True,
            )
    finally:
        receiver.terminate()
        from django.db import connections

        connections.close_all()
        with _admin(base) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(DB))
            )
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "webhooks.json").write_text(json.dumps(results, indent=2))
    lines = ["| workers | deliveries | seconds | deliveries/s |", "|---:|---:|---:|---:|"]
    lines += [
        f"| {k} | {v['succeeded']} | {v['seconds']} | {v['per_second']} |"
        for k, v in results.items()
    ]
    (RESULTS / "webhooks.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())

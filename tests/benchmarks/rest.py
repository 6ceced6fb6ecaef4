"""REST throughput: requests/s and latency with 50 concurrent clients against one web process
(``python -m tests.benchmarks.rest``; ``make bench`` runs it).

The web process is the Procfile's (daphne, ``config.asgi``) on a benchmark database with 200
inboxes and 2,000 emails. Each client holds a keep-alive connection and sends requests back to
back for ``--seconds``: ``GET /inboxes``, ``GET /emails/{id}`` (random ids) and
``POST /inboxes``. Reported: requests/s, p50/p99, errors, and the web process's CPU per request.
There is no target in the issue for these figures; query counts per list are asserted by the test
suite (``tests/test_query_counts.py``). Writes ``results/rest.{json,md}``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import time
from typing import Any

from tests.benchmarks import database
from tests.benchmarks.clients import HOST, _read_body, _read_head
from tests.benchmarks.scenarios import percentile
from tests.benchmarks.stack import RESULTS, BenchStack, child_env, cpu_seconds

CLIENTS = 50


class Client:
    """One keep-alive connection sending requests one after another."""

    def __init__(self, port: int, key: str) -> None:
        self.port, self.key = port, key
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def request(self, method: str, path: str, body: bytes = b"") -> int:
        if self.writer is None or self.writer.is_closing():
            self.reader, self.writer = await asyncio.open_connection(HOST, self.port)
        assert self.reader is not None
        head = (
            f"{method} {path} HTTP/1.1\r\nHost: {HOST}:{self.port}\r\n"
            f"Authorization: Bearer {self.key}\r\nAccept: application/json\r\n"
        )
        if body:
            head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        self.writer.write((head + "\r\n").encode() + body)
        status, headers = await _read_head(self.reader)
        await _read_body(self.reader, status, headers)
        if headers.get("connection", "").lower() == "close":
            self.close()
        return status

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None


async def run(
    port: int, key: str, make: Any, seconds: float, clients: int
) -> tuple[list[float], dict[int, int], float]:
    latencies: list[float] = []
    statuses: dict[int, int] = {}
    deadline = time.perf_counter() + seconds

    async def one() -> None:
        client = Client(port, key)
        try:
            while time.perf_counter() < deadline:
                method, path, body = make()
                started = time.perf_counter()
                try:
                    status = await client.request(method, path, body)
                except (ConnectionError, asyncio.IncompleteReadError):
                    client.close()
                    status = 0
                latencies.append(time.perf_counter() - started)
                statuses[status] = statuses.get(status, 0) + 1
        finally:
            client.close()

    started = time.perf_counter()
    await asyncio.gather(*(one() for _ in range(clients)))
    return latencies, statuses, time.perf_counter() - started


def scenarios(fixtures: database.Fixtures, email_ids: list[str]) -> dict[str, Any]:
    counter = iter(range(10**9))
    return {
        "GET /inboxes": lambda: ("GET", "/api/v1/inboxes?limit=50", b""),
        "GET /emails/{id}": lambda: ("GET", f"/api/v1/emails/{random.choice(email_ids)}", b""),
        "POST /inboxes": lambda: (
            "POST",
            "/api/v1/inboxes",
            json.dumps({"local_part": f"rest-{next(counter)}-{random.randrange(10**9)}"}).encode(),
        ),
    }


def seed_emails(fixtures: database.Fixtures, count: int) -> list[str]:
    from mail.pipeline import receive_one
    from tests.benchmarks.ingest import realistic_4k

    ids = []
    for n in range(count):
        _, address = fixtures.inboxes[n % len(fixtures.inboxes)]
        delivery = receive_one(realistic_4k(address, n), to=address)
        assert delivery.email_id, delivery
        ids.append(delivery.email_id)
    from django.db import connection

    connection.close()
    return ids


def log(text: str) -> None:
    print(f"[rest {time.strftime('%H:%M:%S')}] {text}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--emails", type=int, default=2000)
    args = parser.parse_args(argv)
    base_url = os.environ.get("DATABASE_URL") or database.DEFAULT_DATABASE_URL
    redis_url = os.environ.get("REDIS_URL") or database.DEFAULT_REDIS_URL
    bench_url = database.with_database(base_url, database.BENCH_DB)
    env = child_env(bench_url, redis_url)
    env["CELERY_TASK_ALWAYS_EAGER"] = "false"
    log(f"database {database.BENCH_DB}: drop, create, migrate")
    database.recreate(base_url)
    stack: BenchStack | None = None
    results: dict[str, dict] = {}
    try:
        database.migrate(env)
        database.setup_django(bench_url, redis_url, env["RATE_LIMIT_PER_MINUTE"])
        fixtures = database.create_fixtures(200)
        email_ids = seed_emails(fixtures, args.emails)
        stack = BenchStack(env)
        for name, make in scenarios(fixtures, email_ids).items():
            stack.fresh_web()
            asyncio.run(run(stack.http_port, fixtures.key, make, 2.0, CLIENTS))  # warm
            cpu = cpu_seconds(stack.web.pid)
            latencies, statuses, wall = asyncio.run(
                run(stack.http_port, fixtures.key, make, args.seconds, CLIENTS)
            )
            used = cpu_seconds(stack.web.pid) - cpu
            ok = sum(n for s, n in statuses.items() if 200 <= s < 300)
            results[name] = {
                "requests": len(latencies),
                "ok": ok,
                "statuses": {str(k): v for k, v in statuses.items()},
                "rate": round(ok / wall, 1),
                "p50_ms": round(1000 * percentile(latencies, 50), 2),
                "p99_ms": round(1000 * percentile(latencies, 99), 2),
                "web_cpu_ms_per_request": round(1000 * used / max(1, len(latencies)), 2),
            }
            r = results[name]
            log(f"{name}: {r['rate']}/s p50 {r['p50_ms']} ms p99 {r['p99_ms']} ms {r['statuses']}")
    finally:
        if stack is not None:
            stack.stop()
        from django.db import connections

        connections.close_all()
        database.drop(base_url)
    lines = [
        f"REST, {time.strftime('%Y-%m-%d')}: {CLIENTS} concurrent keep-alive clients, "
        f"{args.seconds:g} s per request kind, one web process (daphne).",
        "",
        "| request | requests/s | p50 | p99 | web CPU/request | statuses |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for name, r in results.items():
        lines.append(
            f"| `{name}` | {r['rate']:,.0f} | {r['p50_ms']:.1f} ms | {r['p99_ms']:.1f} ms "
            f"| {r['web_cpu_ms_per_request']:.2f} ms | {r['statuses']} |"
        )
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "rest.json").write_text(json.dumps(results, indent=2))
    (RESULTS / "rest.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())

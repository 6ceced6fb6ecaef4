"""Data lifecycle at size (issue 30): ``python -m tests.benchmarks.lifecycle``; ``make bench``.

**Purge under ingest.** Expired inboxes (their workspace's grace 0) holding ``--purge`` emails,
each with a realistic 4 KB raw message, are loaded with ``COPY``; then realistic 4 KB SMTP ingest
runs against the real ``smtpd`` (``--runs`` runs of ``--messages``), first alone and then while a
child process runs the retention sweep (``mail.services.retention_sweep``) that deletes them.
Reported: the ingest rate of both (target: with the purge within 15 % of without), the SMTP
acknowledgement latency (p99 and the slowest), the longest lock wait of any backend of the bench
database and the longest purge transaction, both sampled from ``pg_stat_activity`` every 20 ms
(target: no session waits on a lock for 1 s or more), and the purge's own rate.

**Export.** An inbox of ``--export`` emails (4 KB raw each) is exported through the real web
process (daphne), read as it streams; the web process's resident memory is sampled every 50 ms
(VmRSS) and its peak (VmHWM) read at the end, against the same figures before the request.

Writes ``results/lifecycle.{json,md}``. ``--database`` names the bench database (default
``pigeonhole_bench``) so that two benchmarks on one server need not share one.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import random
import statistics
import subprocess
import sys
import threading
import time
from typing import Any

import httpx

from tests.benchmarks import database, ingest, scale
from tests.benchmarks.stack import RESULTS, BenchStack, child_env, rss_kb
from tests.live import ROOT

PURGER_APP = "pigeonhole-purger"
CLIENTS = ingest.CLIENTS


def log(text: str) -> None:
    print(f"[lifecycle {time.strftime('%H:%M:%S')}] {text}", flush=True)


# --- loading ------------------------------------------------------------------------------------


def load_mail(url: str, inboxes: list[tuple[str, str]], workspace_id: str, start: int, count: int):  # type: ignore[no-untyped-def]
    """``count`` emails (ids from ``start``) spread over ``inboxes``, each with a realistic 4 KB
    raw message, by COPY; the inboxes' counters set to match. Returns seconds."""
    import psycopg

    started = time.monotonic()
    variants = [ingest.realistic_4k(address, n) for n in range(16) for _, address in inboxes[:1]]
    with psycopg.connect(url, autocommit=True) as conn:
        step = 50_000
        for first in range(start, start + count, step):
            size = min(step, start + count - first)
            data = scale._rows(inboxes, workspace_id, first, size)
            with conn.cursor().copy(f"COPY mail_email ({scale.COLUMNS}) FROM STDIN") as copy:
                while chunk := data.read(1 << 20):
                    copy.write(chunk)
            with conn.cursor().copy(
                "COPY mail_rawmessage (email_id, content, sha256) FROM STDIN"
            ) as copy:
                for n in range(first, first + size):
                    raw = variants[n % len(variants)]
                    copy.write_row((f"eml_bench{n:012d}", raw, hashlib.sha256(raw).hexdigest()))
            conn.execute(
                "UPDATE mail_email SET size = length(r.content) FROM mail_rawmessage r "
                "WHERE r.email_id = mail_email.id AND mail_email.id >= %s AND mail_email.id < %s",
                [f"eml_bench{first:012d}", f"eml_bench{first + size:012d}"],
            )
            log(f"  {first + size - start:,} of {count:,} loaded")
        ids = [pk for pk, _ in inboxes]
        conn.execute(
            "UPDATE inboxes_inbox i SET email_count = c.n, unread_count = c.n, stored_bytes = c.b "
            "FROM (SELECT e.inbox_id, count(*) AS n, sum(pg_column_size(r.content)) AS b "
            "FROM mail_email e JOIN mail_rawmessage r ON r.email_id = e.id "
            "WHERE e.inbox_id = ANY(%s) GROUP BY e.inbox_id) c WHERE c.inbox_id = i.id",
            [ids],
        )
        conn.execute("VACUUM ANALYZE mail_email")
        conn.execute("VACUUM ANALYZE mail_rawmessage")
    return time.monotonic() - started


def make_inboxes(workspace_id: str, prefix: str, count: int, *, expired: bool) -> list:  # type: ignore[type-arg]
    from datetime import timedelta

    from django.db import connection
    from django.utils import timezone

    from apikeys.models import Workspace
    from inboxes.models import Inbox
    from inboxes.services import inbox_create

    workspace = Workspace.objects.get(pk=workspace_id)
    made = []
    for n in range(count):
        inbox = inbox_create(workspace=workspace, local_part=f"{prefix}-{n:04d}", ttl_minutes=60)
        made.append((inbox.pk, inbox.address))
    if expired:
        Inbox.objects.filter(workspace=workspace, pk__in=[pk for pk, _ in made]).update(
            expires_at=timezone.now() - timedelta(minutes=1)
        )
    connection.close()
    return made


# --- measuring ----------------------------------------------------------------------------------


class LockSampler(threading.Thread):
    """Polls ``pg_stat_activity`` of the bench database: the longest lock wait of any backend,
    and the longest transaction of the purger (its application name)."""

    def __init__(self, url: str, every: float = 0.02) -> None:
        super().__init__(daemon=True)
        self.url, self.every = url, every
        self.max_lock_wait = 0.0
        self.max_purge_xact = 0.0
        self.samples = 0
        self.done = threading.Event()

    def run(self) -> None:
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            while not self.done.is_set():
                row = conn.execute(
                    "SELECT "
                    "coalesce(max(extract(epoch FROM clock_timestamp() - query_start)) "
                    "  FILTER (WHERE wait_event_type = 'Lock'), 0), "
                    "coalesce(max(extract(epoch FROM clock_timestamp() - xact_start)) "
                    "  FILTER (WHERE application_name = %s AND xact_start IS NOT NULL), 0) "
                    "FROM pg_stat_activity WHERE datname = current_database() "
                    "AND pid <> pg_backend_pid()",
                    [PURGER_APP],
                ).fetchone()
                self.max_lock_wait = max(self.max_lock_wait, float(row[0]))
                self.max_purge_xact = max(self.max_purge_xact, float(row[1]))
                self.samples += 1
                time.sleep(self.every)


def ingest_runs(stack: BenchStack, recipients: list[str], count: int, runs: int) -> dict:
    results = []
    for run in range(runs):
        batch = [
            (rcpt := random.choice(recipients), ingest.realistic_4k(rcpt, run * 1_000_000 + i))
            for i in range(30 + count)
        ]
        asyncio.run(ingest.load(stack.smtp_port, batch[:30], CLIENTS))
        results.append(asyncio.run(_load_with_max(stack.smtp_port, batch[30:])))
    return {
        "rates": [r["rate"] for r in results],
        "rate": statistics.median(r["rate"] for r in results),
        "p99_ms": max(r["p99_ms"] for r in results),
        "max_ms": max(r["max_ms"] for r in results),
        "errors": sum(r["errors"] for r in results),
    }


async def _load_with_max(port: int, messages: list[tuple[str, bytes]]) -> dict:
    """``ingest.load`` with the slowest acknowledgement too."""
    latencies: list[float] = []
    errors = 0
    queue: asyncio.Queue[tuple[str, bytes]] = asyncio.Queue()
    for item in messages:
        queue.put_nowait(item)

    async def client() -> None:
        nonlocal errors
        while not queue.empty():
            rcpt, raw = queue.get_nowait()
            try:
                latencies.append(await ingest._transaction(port, rcpt, raw))
            except Exception:
                errors += 1

    started = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(CLIENTS)))
    wall = time.perf_counter() - started
    ordered = sorted(latencies) or [0.0]
    return {
        "rate": round(len(latencies) / wall, 1),
        "p99_ms": round(1000 * ordered[max(0, int(len(ordered) * 0.99) - 1)], 2),
        "max_ms": round(1000 * ordered[-1], 2),
        "errors": errors,
    }


def purger(env: dict[str, str]) -> subprocess.Popen:
    """The retention sweep in a process of its own, as a Celery worker runs it."""
    return subprocess.Popen(
        [sys.executable, "-m", "tests.benchmarks.lifecycle", "--purger"],
        cwd=ROOT,
        env={**env, "PGAPPNAME": PURGER_APP},
        stdout=subprocess.PIPE,
        text=True,
    )


def run_purger() -> int:
    """(Child) sweeps until nothing is due; prints what it deleted and how long it took."""
    import django

    django.setup()
    from django.db import connection

    from mail.services import retention_sweep

    started = time.monotonic()
    inboxes = emails = 0
    while True:
        swept = retention_sweep(seconds=600)
        inboxes += swept.inboxes
        emails += swept.emails
        if not swept.inboxes and not swept.emails:
            break
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM inboxes_inbox WHERE expires_at < now()")
        left = cursor.fetchone()[0]
    print(json.dumps({"inboxes": inboxes, "seconds": time.monotonic() - started, "left": left}))
    return 0


def export(stack: BenchStack, key: str, inbox_id: str, expected: int) -> dict:
    pid = stack.web.pid
    with httpx.Client(base_url=f"http://127.0.0.1:{stack.http_port}", timeout=600) as client:
        client.get("/api/v1/me", headers={"Authorization": f"Bearer {key}"}).raise_for_status()
        before_rss, before_hwm = rss_kb(pid), rss_kb(pid, "VmHWM")
        peak_rss = before_rss
        stop = threading.Event()

        def sample() -> None:
            nonlocal peak_rss
            while not stop.is_set():
                peak_rss = max(peak_rss, rss_kb(pid))
                time.sleep(0.05)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        started = time.monotonic()
        total = messages = 0
        tail = b""
        with client.stream(
            "GET", f"/api/v1/inboxes/{inbox_id}/export", headers={"Authorization": f"Bearer {key}"}
        ) as response:
            response.raise_for_status()
            first_byte = time.monotonic() - started
            for chunk in response.iter_raw(1 << 16):
                total += len(chunk)
                window = tail + chunk
                messages += window.count(b"\n\nFrom ") - tail.count(b"\n\nFrom ")
                tail = window[-8:]
        seconds = time.monotonic() - started
        stop.set()
        sampler.join()
    messages += 1 if total else 0  # the first From_ line has no blank line before it
    return {
        "emails": expected,
        "messages_in_file": messages,
        "bytes": total,
        "seconds": round(seconds, 1),
        "first_byte_ms": round(1000 * first_byte, 1),
        "mb_per_s": round(total / seconds / 1e6, 1),
        "web_rss_before_mb": round(before_rss / 1024, 1),
        "web_rss_peak_sampled_mb": round(peak_rss / 1024, 1),
        "web_hwm_before_mb": round(before_hwm / 1024, 1),
        "web_hwm_after_mb": round(rss_kb(pid, "VmHWM") / 1024, 1),
    }


# --- report -------------------------------------------------------------------------------------


def markdown(results: dict[str, Any]) -> str:
    p = results.get("purge")
    lines = [f"Data lifecycle, {results['date']}."]
    if p:
        base, during = p["without"], p["with"]
        change = during["rate"] / base["rate"] - 1 if base["rate"] else 0.0
        lines += [
            "",
            f"Purge of {p['emails']:,} emails (4 KB raw each) in {p['inboxes']} expired inboxes, "
            f"chunks of {p['chunk']}, resting {p['pause']} times each chunk's time between "
            "them (`RETENTION_PAUSE`), while realistic 4 KB SMTP ingest runs "
            f"({p['runs']} runs of {p['messages']} messages, {CLIENTS} clients, 1 smtpd):",
            "",
            "| ingest | rate | runs | p99 ack | slowest ack | errors |",
            "|---|---:|---|---:|---:|---:|",
        ]
        for name, r in (("alone", base), ("during the purge", during)):
            runs = ", ".join(f"{x:.0f}" for x in r["rates"])
            lines.append(
                f"| {name} | {r['rate']:.0f}/s | {runs} | {r['p99_ms']:.0f} ms "
                f"| {r['max_ms']:.0f} ms | {r['errors']} |"
            )
        lines += [
            "",
            f"- ingest during the purge: {change:+.1%} (target within 15 %: "
            f"{'yes' if change >= -0.15 else '**no**'})",
            f"- longest lock wait of any session (sampled every 20 ms, {p['samples']} samples): "
            f"{1000 * p['max_lock_wait_s']:.0f} ms (target < 1 s: "
            f"{'yes' if p['max_lock_wait_s'] < 1 else '**no**'}); longest purge transaction "
            f"{1000 * p['max_purge_xact_s']:.0f} ms",
            f"- the purge: {p['purge_seconds']:.0f} s in all, "
            f"{p['emails'] / max(p['purge_seconds'], 0.001):,.0f} emails/s "
            f"({p['purged_during_ingest']:,} deleted while ingest was measured); "
            f"{p['left']} expired inboxes left",
        ]
    e = results.get("export")
    if e:
        lines += [
            "",
            f"Export of an inbox of {e['emails']:,} emails (4 KB raw each) through daphne: "
            f"{e['bytes'] / 1e6:,.0f} MB, {e['messages_in_file']:,} messages in the file, in "
            f"{e['seconds']:.0f} s ({e['mb_per_s']} MB/s, first byte after "
            f"{e['first_byte_ms']:.0f} ms). Web process memory: {e['web_rss_before_mb']} MB "
            f"resident before, {e['web_rss_peak_sampled_mb']} MB at the sampled peak; "
            f"peak resident (VmHWM) {e['web_hwm_before_mb']} MB before the request, "
            f"{e['web_hwm_after_mb']} MB after.",
        ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--purge", type=int, default=1_000_000, help="emails to purge")
    parser.add_argument("--purge-inboxes", type=int, default=10)
    parser.add_argument("--export", type=int, default=100_000, help="emails in the exported inbox")
    parser.add_argument("--messages", type=int, default=1000, help="ingest messages per run")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--chunk", type=int, help="RETENTION_CHUNK of the purger (default: the setting's)"
    )
    parser.add_argument("--pause", type=float, help="RETENTION_PAUSE of the purger")
    parser.add_argument("--database", default=database.BENCH_DB)
    parser.add_argument("--only", choices=("purge", "export"))
    parser.add_argument("--purger", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.purger:
        return run_purger()
    database.BENCH_DB = args.database
    base_url = os.environ.get("DATABASE_URL") or database.DEFAULT_DATABASE_URL
    redis_url = os.environ.get("REDIS_URL") or database.DEFAULT_REDIS_URL
    bench_url = database.with_database(base_url, database.BENCH_DB)
    env = child_env(bench_url, redis_url)
    env["CELERY_TASK_ALWAYS_EAGER"] = "false"
    if args.chunk:
        env["RETENTION_CHUNK"] = str(args.chunk)
    if args.pause is not None:
        env["RETENTION_PAUSE"] = str(args.pause)
    results: dict[str, Any] = {"date": time.strftime("%Y-%m-%d"), "args": vars(args)}
    stack: BenchStack | None = None
    log(f"database {database.BENCH_DB}: drop, create, migrate")
    database.recreate(base_url)
    try:
        database.migrate(env)
        database.setup_django(bench_url, redis_url, env["RATE_LIMIT_PER_MINUTE"])
        fixtures = database.create_fixtures(100)
        from django.conf import settings

        from apikeys.models import Workspace

        Workspace.objects.filter(pk=fixtures.workspace_id).update(expired_inbox_grace_hours=0)
        stack = BenchStack(env)
        stack.start_smtp()
        stack.fresh_web()
        recipients = [address for _, address in fixtures.inboxes]
        loaded = 0
        if args.only in (None, "export"):
            (box,) = make_inboxes(fixtures.workspace_id, "export", 1, expired=False)
            seconds = load_mail(bench_url, [box], fixtures.workspace_id, loaded, args.export)
            loaded += args.export
            log(f"export: {args.export:,} emails loaded in {seconds:.0f}s")
            stack.fresh_web()
            results["export"] = export(stack, fixtures.key, box[0], args.export)
            log(f"export: {results['export']}")
        if args.only in (None, "purge"):
            doomed = make_inboxes(
                fixtures.workspace_id, "doomed", args.purge_inboxes, expired=False
            )
            seconds = load_mail(bench_url, doomed, fixtures.workspace_id, loaded, args.purge)
            log(f"purge: {args.purge:,} emails loaded in {seconds:.0f}s")
            without = ingest_runs(stack, recipients, args.messages, args.runs)
            log(f"ingest alone: {without}")
            from django.db import connection
            from django.utils import timezone

            from inboxes.models import Inbox

            Inbox.objects.filter(
                workspace_id=fixtures.workspace_id, pk__in=[pk for pk, _ in doomed]
            ).update(expires_at=timezone.now())
            connection.close()
            sampler = LockSampler(bench_url)
            sampler.start()
            child = purger(env)
            time.sleep(2)  # the purge under way before ingest is measured
            counted = _emails(bench_url)
            during = ingest_runs(stack, recipients, args.messages, args.runs)
            purged_during = counted - _emails(bench_url)
            log(f"ingest during the purge: {during}")
            out, _ = child.communicate(timeout=24 * 3600)
            sampler.done.set()
            sampler.join()
            done = json.loads(out.strip().splitlines()[-1])
            results["purge"] = {
                "emails": args.purge,
                "inboxes": args.purge_inboxes,
                "chunk": int(env.get("RETENTION_CHUNK", settings.RETENTION_CHUNK)),
                "pause": float(env.get("RETENTION_PAUSE", settings.RETENTION_PAUSE)),
                "runs": args.runs,
                "messages": args.messages,
                "without": without,
                "with": during,
                "max_lock_wait_s": round(sampler.max_lock_wait, 3),
                "max_purge_xact_s": round(sampler.max_purge_xact, 3),
                "samples": sampler.samples,
                "purge_seconds": round(done["seconds"], 1),
                "purged_during_ingest": purged_during,
                "left": done["left"],
            }
            log(f"purge: {results['purge']}")
    finally:
        if stack is not None:
            stack.stop()
        from django.db import connections

        connections.close_all()
        database.drop(base_url)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "lifecycle.json").write_text(json.dumps(results, indent=2))
    text = markdown(results)
    (RESULTS / "lifecycle.md").write_text(text + "\n")
    print(text)
    return 0


def _emails(url: str) -> int:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute("SELECT count(*) FROM mail_email").fetchone()[0]


if __name__ == "__main__":
    sys.exit(main())

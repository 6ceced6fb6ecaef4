"""``python -m tests.benchmarks [--quick] [--only a|b|c] [--calls] [--profile cpu|wall] ...``.

Creates ``pigeonhole_bench`` from ``DATABASE_URL``'s server and migrates it, creates a workspace,
an admin key and the inboxes, starts ``manage.py smtpd`` (once) and daphne (fresh for each
scenario) on 127.0.0.1, runs the scenarios, prints the table of figures against targets, writes
``tests/benchmarks/results/latest.{json,md}``, then stops the processes and drops the database.
``--profile`` also records the web and SMTP processes with py-spy during each measurement
(``results/profile-<scenario>-<process>-<mode>.txt``, collapsed stacks; summarise them with
``python -m tests.benchmarks.profiles``). ``--calls`` first times ``mail.realtime``'s database
calls one by one (``tests.benchmarks.calls``). Other people's work shares the machine's CPUs:
before each scenario the harness waits (``--quiet-wait``) for the machine to calm down, and it
reports the CPU everything else used during each measurement beside the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from dataclasses import replace

from tests.benchmarks import calls, database, report
from tests.benchmarks.scenarios import FULL, QUICK, RUNNERS, Context
from tests.benchmarks.stack import (
    RESULTS,
    BenchStack,
    child_env,
    machine_busy_pct,
    raise_open_files,
)

QUIET_PCT = 30.0


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tests.benchmarks", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    parser.add_argument("--only", choices=sorted(RUNNERS), action="append", help="run one scenario")
    parser.add_argument(
        "--profile",
        choices=("cpu", "wall"),
        default="",
        help="py-spy the server processes during each measurement (wall: idle stacks too)",
    )
    parser.add_argument(
        "--fail-on-miss", action="store_true", help="exit 1 when a target is missed"
    )
    parser.add_argument("--messages", type=int, help="override the measured messages of (a)")
    parser.add_argument(
        "--calls",
        action="store_true",
        help="also time mail.realtime's database calls one by one (tests.benchmarks.calls)",
    )
    parser.add_argument(
        "--quiet-wait",
        type=float,
        default=60,
        metavar="SECONDS",
        help="before each scenario, wait up to this long for the machine to be under "
        f"{QUIET_PCT:.0f}%% busy (other work shares the CPUs); 0 to skip",
    )
    return parser.parse_args(argv)


def wait_for_quiet(limit: float) -> float:
    """Waits (up to ``limit`` seconds) until the machine is under QUIET_PCT busy; returns the
    last reading (% of all CPUs)."""
    deadline = time.monotonic() + limit
    busy = machine_busy_pct(2.0)
    if busy >= QUIET_PCT and limit > 0:
        log(f"machine {busy:.0f}% busy before the scenario; waiting up to {limit:.0f}s")
        while busy >= QUIET_PCT and time.monotonic() < deadline:
            busy = machine_busy_pct(2.0)
    return round(busy, 1)


def log(text: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {text}", flush=True)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    sizes = QUICK if args.quick else FULL
    if args.messages:
        sizes = replace(sizes, messages=args.messages)
    chosen = sorted(set(args.only or RUNNERS))
    nofile = raise_open_files()
    base_url = os.environ.get("DATABASE_URL") or database.DEFAULT_DATABASE_URL
    redis_url = os.environ.get("REDIS_URL") or database.DEFAULT_REDIS_URL
    bench_url = database.with_database(base_url, database.BENCH_DB)
    env = child_env(bench_url, redis_url)
    RESULTS.mkdir(parents=True, exist_ok=True)
    for name in ("web.log", "smtpd.log"):
        (RESULTS / name).write_text("")
    meta = {
        "machine": report.machine(),
        "services": report.services(base_url, redis_url),
        "git": report.git(),
        "open_files_limit": nofile,
        "web_env": {
            "DB_POOL_MAX": env.get("DB_POOL_MAX", "10 (default)"),
            "RATE_LIMIT_PER_MINUTE": env["RATE_LIMIT_PER_MINUTE"],
            "MAX_OPEN_STREAMS_PER_KEY": env["MAX_OPEN_STREAMS_PER_KEY"],
        },
    }
    stack: BenchStack | None = None
    django_ready = False
    results: dict[str, dict] = {}
    try:
        log(f"database {database.BENCH_DB}: drop, create, migrate")
        database.recreate(base_url)
        database.migrate(env)
        database.setup_django(bench_url, redis_url, env["RATE_LIMIT_PER_MINUTE"])
        django_ready = True
        count = max(sizes.waiters, min(sizes.idle_streams, 1000), 3 * sizes.mcp_sessions)
        fixtures = database.create_fixtures(count)
        log(f"{len(fixtures.inboxes) + 1} inboxes and an admin key in {fixtures.seconds:.1f}s")
        if args.calls:
            email_id = calls.deliver_one(fixtures)
            wait_for_quiet(args.quiet_wait)
            results["calls"] = asyncio.run(
                calls.measure(
                    fixtures, email_id, repeat=300, waiters=sizes.waiters, rate=sizes.rate
                )
            )
            log("database calls timed:\n" + calls.markdown(results["calls"]))
        stack = BenchStack(env)
        stack.start_smtp()
        for name in chosen:
            stack.fresh_web()
            busy = wait_for_quiet(args.quiet_wait)
            log(
                f"scenario ({name}) on web pid {stack.web.pid}, smtpd pid {stack.smtp.pid}; "
                f"machine {busy:.0f}% busy before"
            )
            context = Context(
                stack, fixtures, redis_url, sizes, database_url=bench_url, profile=args.profile
            )
            started = time.monotonic()
            results[name] = asyncio.run(RUNNERS[name](context))
            results[name]["machine_busy_before_pct"] = busy
            log(f"scenario ({name}) done in {time.monotonic() - started:.0f}s")
    finally:
        if stack is not None:
            stack.stop()
        if django_ready:
            from django.db import connections

            connections.close_all()
        database.drop(base_url)
        log(f"processes stopped, {database.BENCH_DB} dropped")
    table = report.rows(results, sizes)
    print()
    print(report.markdown_table(table))
    print()
    print(report.cpu_table(results))
    print()
    json_path, md_path = report.write(
        table=table, results=results, sizes=sizes, quick=args.quick, meta=meta
    )
    log(f"wrote {json_path.relative_to(RESULTS.parent.parent.parent)} and {md_path.name}")
    missed = any(row.met is False for row in table)
    return 1 if (missed and args.fail_on_miss) else 0


if __name__ == "__main__":
    sys.exit(main())

"""Behaviour at a million stored emails (``python -m tests.benchmarks.scale``; ``make bench``).

A loader bulk-creates emails with PostgreSQL's ``COPY`` (realistic rows: sender, subject with a
code, a short text, the lower-cased ``search_text`` the pipeline writes, the inbox counters kept
right), first to ``--small`` and then to ``--large`` rows. At each size it measures, against the
real web process (daphne) and the real ``smtpd``:

- ``GET /emails?q=`` for a rare term (one email), a medium one (~1 %) and a common one (most
  emails), and ``GET /inboxes/{id}/emails`` (first page and a page deep into the inbox): p50 and
  p95 over sequential requests on a keep-alive connection;
- the query language over whole bodies (issue 28): a body word in ~1 % of the emails, a body word
  in one, both past the 200-character preview (only the full-text index finds them), and a
  three-operator query (a body word, ``from:`` and ``is:unread``);
- SMTP ingest of realistic 4 KB messages through the full pipeline (the ingest harness's load),
  at the large size once with the body's full-text index and once without it (dropped), so that
  the index's cost to ingest is measured in the same run.

Each text body is about 800 characters from a 2,000-word vocabulary (the full-text index has
real work to do). The loader drops the GIN index before its ``COPY`` and builds it again after
(as a restore would), which is many times faster than maintaining it row by row; the generated
``body_tsv`` column is computed by the ``COPY``.

Targets (the performance issue): list and search p95 < 50 ms at 1,000,000 emails; ingest rate at
the large size within 15 % of the small one; with the body index within 10 % of without it.
Writes ``results/scale.{json,md}``. ``BENCH_DATABASE`` names the database (default
``pigeonhole_bench``).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import io
import json
import os
import random
import statistics
import sys
import time
from typing import Any

from tests.benchmarks import database, ingest
from tests.benchmarks.clients import HttpConnection
from tests.benchmarks.scenarios import percentile
from tests.benchmarks.stack import RESULTS, BenchStack, child_env

WORDS = [
    "welcome",
    "invoice",
    "receipt",
    "order",
    "shipped",
    "password",
    "reset",
    "verify",
    "account",
    "security",
    "alert",
    "newsletter",
    "weekly",
    "digest",
    "meeting",
    "reminder",
    "payment",
    "failed",
    "subscription",
    "renewed",
    "trial",
    "ending",
]
SENDERS = [
    f"{name}@{domain}"
    for name in ("noreply", "hello", "billing", "alerts", "team")
    for domain in ("shop.example", "bank.example", "social.example", "cloud.example")
]
MEDIUM = "zeppelin"  # in ~1 % of subjects
RARE_CODE = "918273"  # in exactly one subject
BODY_MEDIUM = "quokka"  # in ~1 % of text bodies, past the preview
BODY_RARE = "xylophonist"  # in exactly one text body, past the preview


@functools.cache
def _paragraphs() -> list[str]:
    """A thousand 800-character paragraphs of made-up words, the same in every run. Built at
    the first load, not at import: the suite imports this module (tests/test_bench_loaders.py)
    and its 110,000 seeded draws were 1.3 s of every test run's collection."""
    vocabulary = [
        "".join(random.Random(n).choice("abcdefghijklmnopqrstuvwxyz") for _ in range(3 + n % 8))
        for n in range(2000)
    ]
    return [
        " ".join(random.Random(-n).choice(vocabulary) for _ in range(110))[:800]
        for n in range(1000)
    ]


def _rows(inboxes: list[tuple[str, str]], workspace_id: str, start: int, count: int) -> io.BytesIO:
    """``count`` emails as COPY text rows (tab-separated, ``\\N`` for null)."""
    rnd = random.Random(start)
    paragraphs = _paragraphs()
    out = io.StringIO()
    base = time.time() - 30 * 86400
    for n in range(start, start + count):
        inbox_id, address = inboxes[n % len(inboxes)]
        sender = SENDERS[rnd.randrange(len(SENDERS))]
        words = " ".join(rnd.choice(WORDS) for _ in range(4))
        code = f"{rnd.randrange(10**6):06d}".replace(RARE_CODE, "000000")
        if n == start + count // 2 and start == 0:
            code = RARE_CODE
        extra = f" {MEDIUM}" if rnd.random() < 0.01 else ""
        subject = f"{words.capitalize()} {code}{extra}"
        paragraph = paragraphs[rnd.randrange(len(paragraphs))]
        body_word = ""
        if rnd.random() < 0.01:
            body_word = f" {BODY_MEDIUM}"
        if n == start + count // 3 and start == 0:
            body_word = f" {BODY_RARE}"
        text = (
            f"Hello, your code is {code}. {words}. {paragraph[:300]}{body_word} {paragraph[300:]}"
        )
        received = time.strftime("%Y-%m-%d %H:%M:%S+00", time.gmtime(base + n * 2))
        search = f"{sender}  {subject} {text[:200]}".lower()
        email_id = f"eml_bench{n:012d}"
        out.write(
            "\t".join(
                [
                    email_id,
                    workspace_id,
                    inbox_id,
                    f"<{n}@bench>",
                    sender,
                    address,
                    sender,
                    "",
                    json.dumps([{"address": address, "name": ""}]),
                    "[]",
                    "[]",
                    subject,
                    text,
                    "",
                    "[]",
                    text[:200],
                    search,
                    "900",
                    "",
                    "[]",
                    json.dumps({"code": code, "link": None, "codes": [code], "links": []}),
                    "[]",
                    "f",
                    "f",
                    "f",
                    received,
                    received,
                    json.dumps([address]),
                ]
            )
            + "\n"
        )
    return io.BytesIO(out.getvalue().encode())


COLUMNS = (
    "id, workspace_id, inbox_id, message_id, envelope_from, envelope_to, from_address, "
    'from_name, "to", cc, reply_to, subject, text, html, headers, preview, search_text, size, '
    'in_reply_to, "references", extracted, defects, has_attachments, read, starred, '
    "received_at, announced_at, envelope_recipients"
)


def load(
    url: str, inboxes: list[tuple[str, str]], workspace_id: str, start: int, end: int
) -> float:
    """COPYs emails ``start``..``end`` in batches; fixes the inbox counters; returns seconds."""
    import psycopg

    started = time.monotonic()
    with psycopg.connect(url, autocommit=True) as conn:
        body_index = conn.execute(
            "SELECT indexdef FROM pg_indexes WHERE indexname = %s", (BODY_INDEX,)
        ).fetchone()
        conn.execute(f"DROP INDEX IF EXISTS {BODY_INDEX}")
        step = 100_000
        for first in range(start, end, step):
            data = _rows(inboxes, workspace_id, first, min(step, end - first))
            with conn.cursor().copy(f"COPY mail_email ({COLUMNS}) FROM STDIN") as copy:
                while chunk := data.read(1 << 20):
                    copy.write(chunk)
        conn.execute(
            "UPDATE inboxes_inbox i SET email_count = c.n, unread_count = c.n "
            "FROM (SELECT inbox_id, count(*) AS n FROM mail_email GROUP BY inbox_id) c "
            "WHERE c.inbox_id = i.id"
        )
        if body_index:
            conn.execute("SET maintenance_work_mem = '512MB'")
            conn.execute(body_index[0])
        conn.execute("VACUUM ANALYZE mail_email")
    return time.monotonic() - started


BODY_INDEX = "email_body_fts"  # the 0005 migration's GIN index over body_tsv


def drop_body_index(url: str) -> None:
    """Drops the body's full-text index and its generated column (to measure ingest without
    them)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"DROP INDEX IF EXISTS {BODY_INDEX}")
        conn.execute("ALTER TABLE mail_email DROP COLUMN IF EXISTS body_tsv")


async def _latencies(port: int, key: str, path: str, count: int) -> dict[str, Any]:
    conn = HttpConnection(port, key)
    timings = []
    status = 0
    try:
        for _ in range(5):
            await conn.get(path)  # warm
        for _ in range(count):
            started = time.perf_counter()
            response = await conn.get(path)
            timings.append(time.perf_counter() - started)
            status = response.status
            if status != 200:
                raise RuntimeError(f"{path}: {status} {response.body[:200]!r}")
        items = len(json.loads(response.body)["data"])
    finally:
        conn.close()
    return {
        "path": path,
        "status": status,
        "items": items,
        "p50_ms": round(1000 * statistics.median(timings), 2),
        "p95_ms": round(1000 * percentile(timings, 95), 2),
    }


def queries(stack: BenchStack, fixtures: database.Fixtures, count: int) -> list[dict]:
    inbox_id = fixtures.inboxes[0][0]
    deep = _deep_cursor(stack, fixtures.key, inbox_id)
    paths = [
        f"/api/v1/emails?q={RARE_CODE}",
        f"/api/v1/emails?q={MEDIUM}",
        "/api/v1/emails?q=your+code",
        f"/api/v1/emails?q={BODY_MEDIUM}",
        f"/api/v1/emails?q={BODY_RARE}",
        f"/api/v1/emails?q={BODY_MEDIUM}+from%3Abank.example+is%3Aunread",
        "/api/v1/emails",
        f"/api/v1/inboxes/{inbox_id}/emails",
        f"/api/v1/inboxes/{inbox_id}/emails?cursor={deep}",
    ]
    return [asyncio.run(_latencies(stack.http_port, fixtures.key, p, count)) for p in paths]


def _deep_cursor(stack: BenchStack, key: str, inbox_id: str) -> str:
    """The cursor of a page 20 pages into the inbox."""

    async def walk() -> str:
        conn = HttpConnection(stack.http_port, key)
        path = f"/api/v1/inboxes/{inbox_id}/emails?limit=100"
        cursor = ""
        try:
            for _ in range(20):
                body = json.loads(
                    (await conn.get(path + (f"&cursor={cursor}" if cursor else ""))).body
                )
                cursor = body["next_cursor"] or cursor
        finally:
            conn.close()
        return cursor

    return asyncio.run(walk())


def ingest_rate(stack: BenchStack, fixtures: database.Fixtures, count: int) -> dict:
    target = ingest.Target(
        "ours-1", stack.smtp_port, [stack.smtp], [address for _, address in fixtures.inboxes]
    )
    return ingest.measure(target, "realistic 4 KB", count, repeat=3, warmup=30)


def markdown(results: dict[str, Any]) -> str:
    lines = [
        f"Scale, {results['date']}: emails loaded with COPY; {results['requests']} sequential "
        "requests per query on one keep-alive connection.",
        "",
        "| stored emails | request | items | p50 | p95 | target p95 < 50 ms |",
        "|---:|---|---:|---:|---:|:---:|",
    ]
    for size, block in results["sizes"].items():
        for q in block["queries"]:
            met = "yes" if q["p95_ms"] < 50 else "**no**"
            lines.append(
                f"| {int(size):,} | `{q['path'].replace('/api/v1', '')}` | {q['items']} "
                f"| {q['p50_ms']:.1f} ms | {q['p95_ms']:.1f} ms | {met} |"
            )
    lines += [
        "",
        "| stored emails | SMTP ingest, realistic 4 KB, 1 smtpd | runs |",
        "|---:|---:|---|",
    ]
    rates = []
    for size, block in results["sizes"].items():
        r = block["ingest"]
        rates.append(r["rate"])
        lines.append(
            f"| {int(size):,} | {r['rate']:.0f}/s | {', '.join(f'{x:.0f}' for x in r['rates'])} |"
        )
    for size, block in results["sizes"].items():
        without = block.get("ingest_without_body_index")
        if without and without["rate"]:
            change = block["ingest"]["rate"] / without["rate"] - 1
            lines.append("")
            lines.append(
                f"Ingest at {int(size):,} with the body's full-text index "
                f"{block['ingest']['rate']:.0f}/s, without it {without['rate']:.0f}/s "
                f"(runs {', '.join(f'{x:.0f}' for x in without['rates'])}): {change:+.0%} "
                f"(target within 10 %: {'yes' if change >= -0.10 else '**no**'})."
            )
    if len(rates) == 2 and rates[0]:
        change = rates[1] / rates[0] - 1
        lines.append("")
        lines.append(
            f"Ingest at the large size: {change:+.0%} against the small one "
            f"(target within ±15 %: {'yes' if abs(change) <= 0.15 else '**no**'})."
        )
    return "\n".join(lines)


def log(text: str) -> None:
    print(f"[scale {time.strftime('%H:%M:%S')}] {text}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--small", type=int, default=10_000)
    parser.add_argument("--large", type=int, default=1_000_000)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--messages", type=int, default=1000, help="ingest messages per run")
    args = parser.parse_args(argv)
    base_url = os.environ.get("DATABASE_URL") or database.DEFAULT_DATABASE_URL
    redis_url = os.environ.get("REDIS_URL") or database.DEFAULT_REDIS_URL
    bench_url = database.with_database(base_url, database.BENCH_DB)
    env = child_env(bench_url, redis_url)
    env["CELERY_TASK_ALWAYS_EAGER"] = "false"
    results: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d"),
        "requests": args.requests,
        "sizes": {},
    }
    stack: BenchStack | None = None
    log(f"database {database.BENCH_DB}: drop, create, migrate")
    database.recreate(base_url)
    try:
        database.migrate(env)
        database.setup_django(bench_url, redis_url, env["RATE_LIMIT_PER_MINUTE"])
        fixtures = database.create_fixtures(100)
        stack = BenchStack(env)
        stack.start_smtp()
        stack.fresh_web()
        loaded = 0
        for size in (args.small, args.large):
            seconds = load(bench_url, fixtures.inboxes, fixtures.workspace_id, loaded, size)
            loaded = size
            log(f"{size:,} emails stored ({seconds:.0f}s to load)")
            stack.fresh_web()
            block = {
                "load_s": round(seconds, 1),
                "queries": queries(stack, fixtures, args.requests),
            }
            for q in block["queries"]:
                log(
                    f"  {q['path']}: {q['items']} items, p50 {q['p50_ms']} ms, p95 {q['p95_ms']} ms"
                )
            block["ingest"] = ingest_rate(stack, fixtures, args.messages)
            log(f"  ingest {block['ingest']['rate']}/s runs {block['ingest']['rates']}")
            if size == args.large:
                drop_body_index(bench_url)
                block["ingest_without_body_index"] = ingest_rate(stack, fixtures, args.messages)
                without = block["ingest_without_body_index"]
                log(f"  ingest without the body index {without['rate']}/s runs {without['rates']}")
            results["sizes"][str(size)] = block
    finally:
        if stack is not None:
            stack.stop()
        from django.db import connections

        connections.close_all()
        database.drop(base_url)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "scale.json").write_text(json.dumps(results, indent=2))
    text = markdown(results)
    (RESULTS / "scale.md").write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

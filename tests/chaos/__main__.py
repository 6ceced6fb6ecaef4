"""The large size of the fault scenarios (``make chaos``): ``python -m tests.chaos``.

Runs against a database of its own (``pigeonhole_chaos``: dropped, created, migrated) and
prints the figures the README reports. Scenario 1 (acknowledged mail survives smtpd crashes)
is the one built so far.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import psycopg
from psycopg import sql

from tests.benchmarks.database import DEFAULT_DATABASE_URL, DEFAULT_REDIS_URL, with_database
from tests.live import ROOT

DB = "pigeonhole_chaos"


def _recreate(base: str, create: bool) -> None:
    with psycopg.connect(with_database(base, "postgres"), autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(DB)))
        if create:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(DB)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=5000)
    parser.add_argument("--duration", type=float, default=120.0)
    args = parser.parse_args(argv)
    base = os.environ.get("DATABASE_URL") or DEFAULT_DATABASE_URL
    os.environ.update(
        DATABASE_URL=with_database(base, DB),
        REDIS_URL=os.environ.get("REDIS_URL") or DEFAULT_REDIS_URL,
        DJANGO_SETTINGS_MODULE="config.settings",
    )
    _recreate(base, create=True)
    try:
        subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, check=True)
        import django

        django.setup()
        from apikeys.services import workspace_get_or_create
        from inboxes.services import inbox_create
        from tests.chaos import smtp_crash

        workspace = workspace_get_or_create(name="chaos")
        addresses = [
            inbox_create(workspace=workspace, local_part=f"chaos{n}", ttl_minutes=None).address
            for n in range(20)
        ]
        started = time.monotonic()
        figures = smtp_crash.run(
            DB, addresses, messages=args.messages, duration_s=args.duration, limit_s=1800
        )
        report = {k: v for k, v in figures.__dict__.items() if k != "details"}
        report["seconds"] = round(time.monotonic() - started, 1)
        print(json.dumps({"scenario 1: acknowledged mail survives crashes": report}, indent=2))
        for line in figures.details[:20]:
            print(line)
        ok = figures.lost == 0 and figures.duplicates == 0 and figures.hash_mismatches == 0
    finally:
        from django.db import connections

        connections.close_all()
        _recreate(base, create=False)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

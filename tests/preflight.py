"""Fails loudly (exit 1) when the PostgreSQL or Redis the suite needs cannot be reached."""

from __future__ import annotations

import os
import sys

import psycopg
import redis


def main() -> int:
    database_url = os.environ.get("DATABASE_URL", "")
    redis_url = os.environ.get("REDIS_URL", "")
    problems = []
    if not database_url.startswith("postgres"):
        problems.append(f"DATABASE_URL must name PostgreSQL for the suite, got {database_url!r}")
    else:
        try:
            dsn = database_url.rsplit("/", 1)[0] + "/postgres"
            with psycopg.connect(dsn, connect_timeout=5) as conn:
                conn.execute("SELECT 1")
        except Exception as exc:
            problems.append(f"PostgreSQL unreachable at {database_url}: {exc}")
    if not redis_url:
        problems.append("REDIS_URL is not set")
    else:
        try:
            redis.Redis.from_url(redis_url, socket_timeout=5).ping()
        except Exception as exc:
            problems.append(f"Redis unreachable at {redis_url}: {exc}")
    for problem in problems:
        print(f"preflight: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

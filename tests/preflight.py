"""Fails loudly (exit 1) when the PostgreSQL or Redis the suite needs cannot be reached.

With a SQLite ``DATABASE_URL`` the suite runs in the embedded configuration instead (what
``make run`` uses: SQLite, in-memory channel layer, in-process jobs); then ``REDIS_URL`` must be
unset and the database's directory writable."""

from __future__ import annotations

import os
import sys

import psycopg
import redis


def _embedded(database_url: str, redis_url: str) -> list[str]:
    problems = []
    directory = os.path.dirname(database_url.removeprefix("sqlite:///")) or "."
    if redis_url:
        problems.append(f"the embedded configuration runs without Redis, got {redis_url!r}")
    if not os.access(directory, os.W_OK):
        problems.append(f"cannot write the SQLite database's directory {directory!r}")
    return problems


def _production(database_url: str, redis_url: str) -> list[str]:
    problems = []
    if not database_url.startswith("postgres"):
        problems.append(
            f"DATABASE_URL must name PostgreSQL (or SQLite: embedded), got {database_url!r}"
        )
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
    return problems


def main() -> int:
    database_url = os.environ.get("DATABASE_URL", "")
    redis_url = os.environ.get("REDIS_URL", "")
    check = _embedded if database_url.startswith("sqlite:///") else _production
    problems = check(database_url, redis_url)
    for problem in problems:
        print(f"preflight: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

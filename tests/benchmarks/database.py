"""The benchmark's own database (``pigeonhole_bench``) and the data the scenarios use.

``DATABASE_URL`` names the server; the harness swaps the database name, drops and recreates it,
migrates it with ``manage.py migrate`` in a child process, and only then sets Django up in this
process (models must not be imported before ``django.setup()``).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import sql

from tests.live import ROOT

# BENCH_DATABASE names another one, so that two checkouts on one server do not drop each other's.
BENCH_DB = os.environ.get("BENCH_DATABASE") or "pigeonhole_bench"
DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/pigeonhole"
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"


def with_database(url: str, name: str) -> str:
    """``url`` with its database name replaced by ``name`` (query string kept)."""
    parts = urlsplit(url)
    if not parts.scheme.startswith("postgres"):
        raise SystemExit(f"bench: DATABASE_URL must name PostgreSQL, got {url!r}")
    return urlunsplit(parts._replace(path=f"/{name}"))


def _maintenance(url: str) -> psycopg.Connection:
    return psycopg.connect(with_database(url, "postgres"), autocommit=True, connect_timeout=5)


def recreate(url: str) -> None:
    """Drops (ending its sessions) and creates the bench database."""
    with _maintenance(url) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(BENCH_DB))
        )
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(BENCH_DB)))


def drop(url: str) -> None:
    with _maintenance(url) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(BENCH_DB))
        )


def analyze(url: str) -> None:
    """``ANALYZE`` of the bench database, once its data is loaded: the planner's statistics that
    autovacuum keeps in production. Without them (a server with autovacuum off, as on the
    machines these benchmarks ran on, or the first minute after a load) PostgreSQL guesses, and
    it guessed a workspace's index for getEmail's read by id, filtering every email of the
    workspace (0.2 ms of PostgreSQL per request at 500 emails, growing with the workspace)."""
    with psycopg.connect(with_database(url, BENCH_DB), autocommit=True, connect_timeout=5) as conn:
        conn.execute("ANALYZE")


def migrate(env: dict[str, str]) -> float:
    """Runs ``manage.py migrate`` against the bench database; returns the seconds it took."""
    started = time.monotonic()
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput", "-v0"], cwd=ROOT, env=env, check=True
    )
    return time.monotonic() - started


def setup_django(bench_url: str, redis_url: str, rate_limit: str) -> None:
    """Points this process at the bench database and sets Django up (before any model import)."""
    os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings"
    os.environ["DATABASE_URL"] = bench_url
    os.environ["REDIS_URL"] = redis_url
    os.environ["RATE_LIMIT_PER_MINUTE"] = rate_limit
    import django

    django.setup()


@dataclass(frozen=True)
class Fixtures:
    """What the scenarios address: one admin key and inboxes as ``(id, address)``."""

    key: str
    workspace_id: str
    inboxes: list[tuple[str, str]]  # the waiters' and idle streams' inboxes
    fanout: tuple[str, str]  # the one inbox of the fan-out scenario
    group_prefix: str  # channel-layer name prefix of an inbox group (+ inbox id)
    seconds: float


def create_fixtures(count: int) -> Fixtures:
    """A workspace, an admin key and ``count`` + 1 inboxes, through the services.

    ``inbox_create`` is the real path (it emits ``inbox.created``, so each inbox's event chain
    starts as in production); its after-commit wake-up publishes to Redis from this process.
    """
    from django.conf import settings
    from django.db import connection

    from apikeys.audit import Actor  # models: only once django.setup() ran
    from apikeys.services import ALL_SCOPES, api_key_create, workspace_get_or_create
    from events.wake import inbox_group
    from inboxes.services import inbox_create

    started = time.monotonic()
    workspace = workspace_get_or_create(name="Benchmark")
    key = api_key_create(
        workspace=workspace, name="bench admin", scopes=ALL_SCOPES, by=Actor.system("tests")
    ).plain
    inboxes = []
    for number in range(count):
        inbox = inbox_create(
            workspace=workspace, local_part=f"bench-{number:05d}", ttl_minutes=None
        )
        inboxes.append((inbox.pk, inbox.address))
    fanout = inbox_create(workspace=workspace, local_part="bench-fanout", ttl_minutes=None)
    layer = settings.CHANNEL_LAYERS["default"]
    prefix = layer.get("CONFIG", {}).get("prefix", "asgi")
    connection.close()
    return Fixtures(
        key=key,
        workspace_id=workspace.pk,
        inboxes=inboxes,
        fanout=(fanout.pk, fanout.address),
        group_prefix=f"{prefix}__group__{inbox_group('')}",
        seconds=time.monotonic() - started,
    )

"""Isolation of pytest-xdist workers: each worker gets a Redis database of its own.

Loaded early with ``-p tests.workers`` (pyproject.toml's ``addopts``), before pytest-django reads
the settings, because ``REDIS_URL`` is read once, at settings import. pytest-xdist already gives
each worker a test database of its own (``test_<name>_gw0``, …); the processes a live test starts
inherit the worker's environment (``tests.live.child_env``), so a worker's Celery workers,
daphne and smtpd share its Redis database and never another worker's: Celery's queues, the
channel layer's groups, the rate limiter's and the open-stream leases' keys are all per worker.

Worker ``gwN`` uses database ``10 + N`` of the same Redis server (``N`` < 6); a run without xdist
keeps the ``REDIS_URL`` it was given.
"""

from __future__ import annotations

import os
import re

FIRST_DB = 10
MAX_WORKERS = 6


def worker_redis_url(url: str, worker: str) -> str:
    """``url`` pointed at worker ``worker``'s own database (``gw2`` → ``/12``)."""
    number = int(worker.removeprefix("gw"))
    if number >= MAX_WORKERS:
        raise RuntimeError(f"tests.workers: at most {MAX_WORKERS} xdist workers (got {worker})")
    base, _, query = url.partition("?")
    base = re.sub(r"/\d*$", "", base.rstrip("/"))
    return f"{base}/{FIRST_DB + number}" + (f"?{query}" if query else "")


_worker = os.environ.get("PYTEST_XDIST_WORKER")
if _worker and os.environ.get("REDIS_URL"):
    os.environ["REDIS_URL"] = worker_redis_url(os.environ["REDIS_URL"], _worker)

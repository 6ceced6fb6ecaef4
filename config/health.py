"""GET /healthz: 200 when the database (and Redis, if configured) answer, 503 otherwise."""

from __future__ import annotations

import logging

import redis
from django.conf import settings
from django.db import connection
from django.http import HttpRequest, JsonResponse

logger = logging.getLogger(__name__)


def healthz(request: HttpRequest) -> JsonResponse:
    checks: dict[str, str] = {}
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        checks["database"] = "ok"
    except Exception as exc:  # any failure means unhealthy; say which
        logger.warning("healthz: database check failed: %s", exc)
        checks["database"] = "error"
    if settings.REDIS_URL:
        try:
            client = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=2)
            client.ping()
            client.close()
            checks["redis"] = "ok"
        except Exception as exc:
            logger.warning("healthz: redis check failed: %s", exc)
            checks["redis"] = "error"
    healthy = all(v == "ok" for v in checks.values())
    return JsonResponse(
        {"status": "ok" if healthy else "error", "checks": checks}, status=200 if healthy else 503
    )

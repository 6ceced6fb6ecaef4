"""The Celery application; tasks live in each app's ``tasks.py``, periodic ones are listed here.

In embedded mode (no ``REDIS_URL``) ``manage.py serve`` runs the same schedule in-process.
"""

from __future__ import annotations

import os
from types import SimpleNamespace
from typing import Any

import celery
from django.conf import settings

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

# What Celery's eager path asks of a producer: only its serializer (None: task_serializer).
_NO_BROKER = SimpleNamespace(serializer=None)


class Task(celery.Task):
    """The project's task class: with eager tasks (embedded mode, ``CELERY_TASK_ALWAYS_EAGER``)
    ``apply_async`` runs the task without touching a broker.

    Celery's eager ``apply_async`` still takes a producer from the broker's connection pool, only
    to ask it which serializer to round-trip the arguments through. Embedded mode has no broker
    (the ``memory://`` placeholder): the first queued task of a process opened a connection to
    it, and kombu logged ``No hostname was supplied. Reverting to default 'localhost'`` on the
    first mail sent. Given a producer, Celery uses it instead of the pool.
    """

    def apply_async(  # type: ignore[override]
        self,
        args: Any = None,
        kwargs: Any = None,
        task_id: str | None = None,
        producer: Any = None,
        link: Any = None,
        link_error: Any = None,
        shadow: str | None = None,
        **options: Any,
    ) -> Any:
        if producer is None and self._get_app().conf.task_always_eager:
            producer = _NO_BROKER
        return super().apply_async(
            args, kwargs, task_id, producer, link, link_error, shadow, **options
        )


app = celery.Celery("pigeonhole", task_cls=Task)
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
app.conf.beat_schedule = {
    "expire-inboxes": {"task": "inboxes.expire_due", "schedule": 30.0},
    "prune-events": {"task": "events.prune", "schedule": 600.0},
    "announce-overdue-emails": {"task": "mail.announce_overdue", "schedule": 15.0},
    "sweep-webhook-deliveries": {
        "task": "webhooks.sweep",
        "schedule": settings.WEBHOOK_SWEEP_EVERY,
    },
    "sweep-outbox-deliveries": {"task": "outbox.sweep", "schedule": settings.OUTBOX_SWEEP_EVERY},
    "expire-pending-outbox": {"task": "outbox.expire_pending", "schedule": 300.0},
    # Each run checks the custom domains due (DOMAIN_RECHECK_MINUTES), at most 100.
    "recheck-domains": {"task": "inboxes.recheck_domains", "schedule": 60.0},
}

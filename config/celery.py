"""The Celery application; tasks live in each app's ``tasks.py``, the periodic ones are listed in
the settings (``CELERY_BEAT_SCHEDULE``).

In embedded mode (no ``REDIS_URL``) ``manage.py serve`` runs the same schedule in-process.
Importing this module reads no settings (the configuration is loaded when first used): the
``pigeonhole-server`` command (config.server) imports the project before it sets the environment
the settings are read from.
"""

from __future__ import annotations

import os
from types import SimpleNamespace
from typing import Any

import celery

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

"""The Celery application; tasks live in each app's ``tasks.py``, periodic ones are listed here.

In embedded mode (no ``REDIS_URL``) ``manage.py serve`` runs the same schedule in-process.
"""

from __future__ import annotations

import os

from celery import Celery
from django.conf import settings

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("pigeonhole")
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

"""Rows as work: the one lease / claim / retry / sweep engine of background deliveries.

Outgoing mail (``outbox.OutboxItem``) and webhook deliveries (``webhooks.Delivery``) are rows a
worker must act on until they succeed or give up. The row is the truth; a Celery task only says
"look at row X now", so a lost task, a killed worker or a broker outage delays work but never
loses or doubles it. Each kind of row describes itself once as a :class:`WorkQueue`:

- **due**: in one of ``due_states`` with ``next_attempt_at`` reached;
- **claim**: one conditional ``UPDATE`` takes the lease of a due, free row (``leased_until``
  unset or past), with a fresh token when the row keeps one, so only the holder records the
  outcome;
- **retry**: ``next_attempt`` spaces failures by the queue's schedule setting (seconds per
  attempt, ±10 % jitter so a failed burst does not come back as one); past the schedule, give up;
- **queue**: hand the id to the queue's Celery task; in embedded mode (eager tasks) a queue that
  ``runs_inline`` attempts at once, and anything with a countdown is left to the sweeper, which
  runs in-process there;
- **sweep**: with a broker, re-queue rows whose lease ran out (their worker died with its task)
  at once and once, and rows nobody claimed ``sweep_grace`` after they were due only while the
  broker's queue is empty and at most once per grace (while tasks wait there the workers have not
  caught up, and queueing them again would only lengthen the wait); in embedded mode, attempt
  every due row right here.

The schedule, lease and grace of each queue are settings (``OUTBOX_RETRY_SCHEDULE``,
``WEBHOOK_RETRY_SCHEDULE``, …: docs/configuration.md), read when used so tests and operators
can change them.
"""

from __future__ import annotations

import logging
import random
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

logger = logging.getLogger(__name__)

JITTER = 0.1  # each retry delay is scaled by a random factor in [1 - JITTER, 1 + JITTER]
SWEEP_BATCH = 500  # rows a sweep hands over at most per run (the next run takes the rest)


def _celery() -> Any:
    # Local: config.celery loads the Django settings this module is imported under (a cycle at
    # import time, harmless at call time).
    from config.celery import app

    return app


def eager() -> bool:
    """Embedded mode: no broker, tasks run in the calling process."""
    return bool(_celery().conf.task_always_eager)


def backlog() -> int:
    """How many tasks wait in the broker's queue for a worker (0 when it cannot tell)."""
    app = _celery()
    try:
        with app.connection_for_write() as conn:
            try:
                declared = conn.default_channel.queue_declare(
                    queue=app.conf.task_default_queue, passive=True
                )
            except conn.channel_errors:  # no such queue: nothing ever waited, or all was taken
                return 0
            return int(declared.message_count)
    except Exception:  # the broker is down: queue() will say so
        return 0


@dataclass(frozen=True)
class WorkQueue:
    """One kind of row that background workers deliver (see the module docstring)."""

    model: type[models.Model]
    state_field: str  # the column whose value says whether the row still has work
    due_states: tuple[str, ...]
    task: str  # the registered name of the Celery task that takes one row's id
    retry_schedule: str  # the setting: seconds before each retry; one more attempt than steps
    lease_seconds: Callable[[], float]  # how long a claim holds the row
    sweep_grace: str  # the setting: seconds an unclaimed due row waits before a re-queue
    runs_inline: bool  # embedded mode: queue() attempts right away rather than leave it to sweep
    token_field: str | None = None  # a column holding the claim's token, if the row keeps one

    # --- reading ----------------------------------------------------------------------------

    def _rows(self, now: datetime) -> models.QuerySet:
        # Workers and sweepers take ids from every workspace: cross-tenant by design.
        manager = self.model.objects  # type: ignore[attr-defined]
        rows = manager.unscoped() if hasattr(manager, "unscoped") else manager.all()
        return rows.filter(**{f"{self.state_field}__in": self.due_states}, next_attempt_at__lte=now)

    @staticmethod
    def _free(now: datetime) -> Q:
        return Q(leased_until__isnull=True) | Q(leased_until__lt=now)

    def lease(self) -> timedelta:
        return timedelta(seconds=self.lease_seconds())

    def due(self, limit: int = SWEEP_BATCH, *, overdue_by: timedelta = timedelta(0)) -> list[str]:
        """Ids of rows whose attempt is due (for ``overdue_by`` already) and nobody holds,
        the longest-waiting first."""
        now = timezone.now()
        rows = self._rows(now - overdue_by).filter(self._free(now))
        return list(rows.order_by("next_attempt_at").values_list("pk", flat=True)[:limit])

    # --- claiming and retrying --------------------------------------------------------------

    def claim(self, pk: str, now: datetime | None = None) -> str | None:
        """Takes the lease of a due, free row: its token (``""`` when the row keeps none), or
        None when another worker holds it or it is not due."""
        now = now or timezone.now()
        token = uuid.uuid4().hex if self.token_field else ""
        changes: dict[str, Any] = {"leased_until": now + self.lease()}
        if self.token_field:
            changes[self.token_field] = token
        claimed = self._rows(now).filter(self._free(now), pk=pk).update(**changes)
        return token if claimed == 1 else None

    def released(self) -> dict[str, Any]:
        """The column values of a row nobody holds (to write with an attempt's outcome)."""
        free: dict[str, Any] = {"leased_until": None}
        if self.token_field:
            free[self.token_field] = ""
        return free

    def next_attempt(self, count: int, finished: datetime) -> datetime | None:
        """When to try again after the ``count``-th failed attempt that ended at ``finished``:
        the schedule's ``count``-th delay with jitter, or None once the schedule is spent."""
        schedule = list(getattr(settings, self.retry_schedule))
        if count > len(schedule):
            return None
        delay = schedule[count - 1] * random.uniform(1 - JITTER, 1 + JITTER)
        return finished + timedelta(seconds=delay)

    # --- handing work to workers ------------------------------------------------------------

    def queue(self, pk: str, countdown: float | None = None) -> None:
        """Hands a row's id to a worker. In embedded mode a queue that ``runs_inline`` attempts
        now (unless asked to wait: eager tasks cannot, the in-process sweeper will); otherwise
        the sweeper finds the row. A broker that is down is logged, never raised: the row is
        still due and the sweeper hands it over when the broker is back."""
        app = _celery()
        if app.conf.task_always_eager and (not self.runs_inline or countdown is not None):
            return
        try:
            if self.task not in app.tasks:  # the apps' tasks modules, as a worker imports them
                app.loader.import_default_modules()
            app.tasks[self.task].apply_async((pk,), countdown=countdown)
        except Exception:
            logger.warning("could not queue %s %s; the sweeper will", self.task, pk)

    def sweep(self, attempt: Callable[[str], object]) -> int:
        """Hands over due rows the broker lost (see the module docstring); embedded mode calls
        ``attempt`` for every due row here. The number of rows handed over."""
        if eager():
            due = self.due()
            for pk in due:
                attempt(pk)
            return len(due)
        now = timezone.now()
        rows = self._rows(now)
        expired = list(
            rows.filter(leased_until__lt=now)
            .order_by("leased_until")
            .values_list("pk", flat=True)[:SWEEP_BATCH]
        )
        if expired:  # cleared, so that each lapsed lease is re-queued once
            rows.filter(pk__in=expired, leased_until__lt=now).update(**self.released())
        unclaimed: list[str] = []
        if not backlog():
            cutoff = now - timedelta(seconds=float(getattr(settings, self.sweep_grace)))
            waiting = rows.filter(leased_until__isnull=True, next_attempt_at__lte=cutoff)
            unclaimed = list(
                waiting.exclude(pk__in=expired)
                .order_by("next_attempt_at")
                .values_list("pk", flat=True)[:SWEEP_BATCH]
            )
            if unclaimed:  # the grace starts again; the rows stay due
                waiting.filter(pk__in=unclaimed).update(next_attempt_at=now)
        for pk in expired + unclaimed:
            self.queue(pk)
        return len(expired) + len(unclaimed)

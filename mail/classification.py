"""Classifier labels for a stored email, bounded in time, then its announcement.

The classifier answers every active label of the workspace in parallel threads (no database use
in them: examples are read first). Answers in time go into ``email.received``; when
``CLASSIFIER_TIMEOUT`` passes, the email is announced with what is known and late answers fire
``email.labeled`` when they come (up to ``CLASSIFIER_REQUEST_TIMEOUT`` seconds).
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor, wait
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from labels import selectors as label_selectors
from labels import services as label_services
from labels.classifier.base import Verdict, facts_of
from labels.models import Label
from mail.models import Email
from mail.pipeline import announce, emit_labeled

logger = logging.getLogger(__name__)

OVERDUE_GRACE = timedelta(seconds=30)


def _record(email: Email, answers: list[tuple[Label, Verdict]]) -> list[dict]:
    with transaction.atomic():
        applied = [
            row
            for label, verdict in answers
            if (
                row := label_services.verdict_record(
                    email_id=email.pk, label=label, verdict=verdict
                )
            )
        ]
    return applied


def classify_and_announce(*, email_id: str) -> int:
    """Runs the classifier for one email and announces it; returns the labels applied."""
    # A worker, handed an email id by its own queue: cross-tenant by design.
    email = (
        Email.objects.unscoped().select_related("inbox", "workspace").filter(pk=email_id).first()
    )
    if email is None:
        return 0
    labels = label_selectors.classifier_labels(email.workspace)
    if not labels or email.announced_at is not None:
        announce(email=email, inbox=email.inbox)
        return 0
    facts = facts_of(email)
    examples = {label.pk: label_selectors.examples_for(label) for label in labels}
    backend = label_services.backend()
    pool = ThreadPoolExecutor(max_workers=min(8, len(labels)), thread_name_prefix="classify")
    futures = {
        pool.submit(
            label_services.classify,
            label=label,
            facts=facts,
            examples=examples[label.pk],
            using=backend,
        ): label
        for label in labels
    }
    done, late = wait(futures, timeout=settings.CLASSIFIER_TIMEOUT)
    applied = _record(email, [(futures[f], f.result()) for f in done])
    announce(email=email, inbox=email.inbox)
    if late:
        logger.info("classifier late for %s: %d label(s)", email_id, len(late))
        finished, _ = wait(late, timeout=settings.CLASSIFIER_REQUEST_TIMEOUT + 1)
        late_applied = _record(email, [(futures[f], f.result()) for f in finished])
        if late_applied:
            with transaction.atomic():
                emit_labeled(email=email, inbox=email.inbox, labels=late_applied)
        applied += late_applied
    pool.shutdown(wait=False, cancel_futures=True)
    return len(applied)


def announce_overdue() -> int:
    """Announces emails whose classification task was lost (worker crash, broker restart)."""
    cutoff = timezone.now() - timedelta(seconds=settings.CLASSIFIER_TIMEOUT) - OVERDUE_GRACE
    count = 0
    overdue = Email.objects.unscoped().filter(announced_at__isnull=True, received_at__lt=cutoff)
    for email in overdue.select_related("inbox")[:500]:
        count += announce(email=email, inbox=email.inbox)
    return count

"""Writes of labels on emails. The mail pipeline calls :func:`apply_to_new_email` (rules now;
the classifier joins with the labels issue)."""

from __future__ import annotations

from collections.abc import Sequence

from django.db import transaction

from labels.models import EmailLabel, Label, LabelSource


def manual_labels_set(*, email_id: int | str, labels: Sequence[Label]) -> list[EmailLabel]:
    """Replaces the manual labels of an email; rule and classifier labels stay."""
    with transaction.atomic():
        wanted = {label.pk: label for label in labels}
        existing = {row.label_id: row for row in EmailLabel.objects.filter(email_id=email_id)}
        stale_manual = [
            row.pk
            for label_id, row in existing.items()
            if row.source == LabelSource.MANUAL and label_id not in wanted
        ]
        EmailLabel.objects.filter(pk__in=stale_manual).delete()
        for label_id, label in wanted.items():
            row = existing.get(label_id)
            if row is None:
                EmailLabel.objects.create(
                    email_id=email_id, label=label, key=label.key, source=LabelSource.MANUAL
                )
            elif row.source != LabelSource.MANUAL:
                # A person confirmed it: the label is now theirs (kept as a training example).
                row.source, row.confidence = LabelSource.MANUAL, 1.0
                row.save(update_fields=["source", "confidence"])
    return list(EmailLabel.objects.filter(email_id=email_id).order_by("created_at", "pk"))

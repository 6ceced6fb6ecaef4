"""Writes of labels and of labels on emails: CRUD, rules on receipt, classifier verdicts, manual
labels and the feedback the built-in classifier learns from."""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence
from typing import Any

from django.conf import settings
from django.db import IntegrityError, models, transaction

from apikeys import audit
from apikeys.audit import Actor, Target
from apikeys.models import Workspace
from config.api.errors import FeatureDisabled, NotFound, ValidationFailed
from config.changes import save_changes
from config.patterns import Budget
from config.rows import bulk_insert
from labels import rules as rules_engine
from labels.classifier.base import Backend, EmailFacts, Example, Verdict
from labels.exceptions import LabelExists
from labels.models import EmailLabel, FeedbackSource, Label, LabelFeedback, LabelSource
from labels.selectors import classifier_labels as classifier_labels_of
from labels.selectors import examples_for

logger = logging.getLogger(__name__)


def _require_classifier(workspace: Workspace, instructions: str) -> None:
    if instructions.strip() and not workspace.classifier_enabled:
        raise FeatureDisabled(
            "The classifier is disabled for this workspace; labels need "
            "empty instructions until it is enabled."
        )


_AUDITED = ["key", "name", "color", "instructions", "threshold", "rules", "enabled"]


def _target(label: Label) -> Target:
    return Target("label", label.pk, label.key)


def label_create(*, workspace: Workspace, key: str, name: str, by: Actor, **fields: Any) -> Label:
    """A new label (409 label_exists when the key is taken)."""
    _require_classifier(workspace, fields.get("instructions", ""))
    if "rules" in fields:
        fields["rules"] = _valid_rules(fields["rules"])
    try:
        with transaction.atomic():
            label = Label.objects.create(workspace=workspace, key=key, name=name, **fields)
            audit.record(
                workspace=workspace,
                by=by,
                action="label.created",
                target=_target(label),
                changes=audit.created(label, _AUDITED),
            )
            return label
    except IntegrityError:
        raise LabelExists(f"A label '{key}' exists.") from None


def label_update(*, label: Label, by: Actor, **fields: Any) -> Label:
    """Changes the given fields only."""
    if "instructions" in fields:
        _require_classifier(label.workspace, fields["instructions"])
    if "rules" in fields:
        fields["rules"] = _valid_rules(fields["rules"])
    changed = [name for name, value in fields.items() if getattr(label, name) != value]
    before = {name: getattr(label, name) for name in changed}
    for name in changed:
        setattr(label, name, fields[name])
    if changed:
        with transaction.atomic():
            save_changes(label, [*changed, "updated_at"], gone=NotFound("No such label."))
            audit.record(
                workspace=label.workspace_id,
                by=by,
                action="label.updated",
                target=_target(label),
                changes=audit.diff(before, {name: fields[name] for name in changed}),
            )
    return label


def _valid_rules(rules: Any) -> dict:
    """``rules`` normalised by the rules engine (every condition complete), or 400
    ``validation_error``: whoever calls the service, only rules the engine can run are stored."""
    normalised, issues = rules_engine.validate(rules, path="rules")
    if issues:
        raise ValidationFailed("The rules are not valid.", issues=issues)
    return normalised


def label_delete(*, label: Label, by: Actor) -> None:
    """Deletes the label; it disappears from every email (cascade)."""
    with transaction.atomic():
        audit.record(
            workspace=label.workspace_id, by=by, action="label.deleted", target=_target(label)
        )
        label.delete()


def _label_dict(row: EmailLabel) -> dict:
    return {"key": row.key, "source": row.source, "confidence": row.confidence}


def rule_labels(
    *, email_id: str, facts: rules_engine.Facts, labels: Sequence[Label]
) -> list[EmailLabel]:
    """Unsaved rows for every enabled label of ``labels`` whose rules match ``facts`` (source
    ``rule``, confidence 1). The receive path stores them with the rest of its batch. All the
    labels' patterns share one matching budget: an email costs the writer a bounded moment
    however many labels and conditions the workspace has."""
    budget = Budget()
    return [
        EmailLabel(email_id=email_id, label=label, key=label.key, source=LabelSource.RULE)
        for label in labels
        if label.enabled and label.rules and _rules_match(label, facts, budget)
    ]


def _rules_match(label: Label, facts: rules_engine.Facts, budget: Budget) -> bool:
    """Whether the label's rules match; a label whose rules cannot run (stored by hand, say) is
    logged and left off, never a reason to refuse the mail."""
    try:
        return rules_engine.evaluate(label.rules, facts, budget).matched
    except Exception:
        logger.exception("label %s (%s): its rules cannot run", label.key, label.pk)
        return False


def labels_store(rows: Sequence[EmailLabel]) -> None:
    """Stores label rows made by :func:`rule_labels` (one insert for a batch)."""
    bulk_insert(EmailLabel, rows)


def label_dicts(rows: Sequence[EmailLabel]) -> list[dict]:
    """``[{key, source, confidence}]`` of label rows, as events carry them."""
    return [_label_dict(row) for row in rows]


def backend() -> Backend:
    """The configured classifier backend: an OpenAI-compatible server, else the built-in one.
    One instance per configuration and process, so its HTTP client and caches are reused."""
    return _backend(
        settings.CLASSIFIER_URL,
        settings.CLASSIFIER_MODEL,
        settings.CLASSIFIER_API_KEY,
        settings.CLASSIFIER_REQUEST_TIMEOUT,
    )


@functools.lru_cache(maxsize=4)
def _backend(url: str, model: str, api_key: str, timeout: float) -> Backend:
    if url:
        from labels.classifier.openai import OpenAIBackend

        return OpenAIBackend(url=url, model=model, api_key=api_key, timeout=timeout)
    from labels.classifier.builtin import BuiltinBackend

    return BuiltinBackend()


def classify(
    *,
    label: Label,
    facts: EmailFacts,
    examples: Sequence[Example] | None = None,
    using: Backend | None = None,
) -> Verdict:
    """The classifier's answer to the label's question for one email (never raises). Pass
    ``examples`` (from ``selectors.examples_for``) to call this from a thread without a query."""
    try:
        return (using or backend()).classify(
            question=label.instructions,
            email=facts,
            examples=examples_for(label) if examples is None else examples,
        )
    except Exception as exc:
        logger.exception("classifier failed for label %s", label.key)
        return Verdict(answer=False, confidence=0.0, reason=f"classifier error: {exc}")


def verdict_record(*, email_id: str, label: Label, verdict: Verdict) -> dict | None:
    """Applies the label when the answer is yes with confidence >= threshold (never over a
    person's or a rule's label, nor over a person's removal of it)."""
    if not (verdict.answer and verdict.confidence >= label.threshold):
        return None
    if LabelFeedback.objects.filter(label=label, email_id=email_id, positive=False).exists():
        return None
    row, created = EmailLabel.objects.get_or_create(
        email_id=email_id,
        label=label,
        defaults={
            "key": label.key,
            "source": LabelSource.CLASSIFIER,
            "confidence": round(verdict.confidence, 4),
        },
    )
    return _label_dict(row) if created else None


def _feedback(
    label: Label, email_id: str, facts: EmailFacts, positive: bool, source: str
) -> LabelFeedback:
    row, _ = LabelFeedback.objects.update_or_create(
        label=label,
        email_id=email_id,
        defaults={
            "positive": positive,
            "source": source,
            "from_address": facts.from_address[:320],
            "from_name": facts.from_name[:320],
            "subject": facts.subject,
            "text": facts.text[:20_000],
            "signals": sorted(facts.signals),
        },
    )
    return row


def _example_target(label: Label) -> Target:
    return Target("label", label.pk, label.key)


def example_add(
    *, label: Label, email_id: str, facts: EmailFacts, answer: bool, by: Actor
) -> LabelFeedback:
    """Records a person's explicit yes or no for the label on one email (the caller found the
    email in the label's workspace) as a training example; a later decision about the same
    email replaces the earlier one, whatever made it. The email's labels stay as they are, but
    a ``no`` keeps the classifier from applying the label to it."""
    with transaction.atomic():
        row = _feedback(label, email_id, facts, answer, FeedbackSource.EXAMPLE)
        audit.record(
            workspace=label.workspace_id,
            by=by,
            action="label.example_added",
            target=_example_target(label),
            changes={"example": {"after": f"{email_id}: {'yes' if answer else 'no'}"}},
        )
    return row


def example_remove(*, example: LabelFeedback, by: Actor) -> None:
    """Forgets one training example, whatever made it (the email's labels stay)."""
    label = example.label
    with transaction.atomic():
        audit.record(
            workspace=label.workspace_id,
            by=by,
            action="label.example_removed",
            target=_example_target(label),
            changes={
                "example": {"before": f"{example.email_id}: {'yes' if example.positive else 'no'}"}
            },
        )
        LabelFeedback.objects.filter(label=label, pk=example.pk).delete()


def manual_labels_set(
    *, email: models.Model, labels: Sequence[Label], facts: EmailFacts
) -> list[EmailLabel]:
    """Replaces the manual labels of an email (a ``mail.Email``); rule and classifier labels
    stay. Each manual label is remembered as a positive example for the classifier."""
    email_id = email.pk
    with transaction.atomic():
        wanted = {label.pk: label for label in labels}
        existing = {row.label_id: row for row in EmailLabel.objects.filter(email=email)}
        stale = [
            row.pk
            for label_id, row in existing.items()
            if row.source == LabelSource.MANUAL and label_id not in wanted
        ]
        EmailLabel.objects.filter(email=email, pk__in=stale).delete()
        LabelFeedback.objects.filter(
            label__in=[row.label for row in existing.values() if row.pk in stale],
            email_id=email_id,
            positive=True,
            source=FeedbackSource.LABEL,
        ).delete()
        for label_id, label in wanted.items():
            row = existing.get(label_id)
            if row is None:
                EmailLabel.objects.create(
                    email_id=email_id, label=label, key=label.key, source=LabelSource.MANUAL
                )
            elif row.source != LabelSource.MANUAL:
                row.source, row.confidence = LabelSource.MANUAL, 1.0
                row.save(update_fields=["source", "confidence"])
            _feedback(label, email_id, facts, True, FeedbackSource.LABEL)
    return list(EmailLabel.objects.filter(email=email).order_by("created_at", "pk"))


def labels_remove(*, email: models.Model, labels: Sequence[Label], facts: EmailFacts) -> int:
    """Removes these labels whatever their source; a removed classifier label becomes a negative
    example (and the classifier will not put it back on this email)."""
    email_id = email.pk
    with transaction.atomic():
        rows = list(EmailLabel.objects.filter(email=email, label__in=labels))
        for row in rows:
            if row.source == LabelSource.CLASSIFIER:
                _feedback(row.label, email_id, facts, False, FeedbackSource.REMOVAL)
            elif row.source == LabelSource.MANUAL:
                LabelFeedback.objects.filter(
                    label=row.label, email_id=email_id, source=FeedbackSource.LABEL
                ).delete()
        EmailLabel.objects.filter(email=email, pk__in=[row.pk for row in rows]).delete()
    return len(rows)


def _test_one(
    *,
    label: Label,
    workspace: Workspace,
    classifier_on: bool,
    rule_facts: rules_engine.Facts,
    facts: EmailFacts,
    budget: Budget,
    examples: Sequence[Example] | None = None,
) -> dict:
    if label.rules:
        match = rules_engine.evaluate(label.rules, rule_facts, budget)
        if match.matched:
            return {
                "key": label.key,
                "matched": True,
                "source": "rule",
                "confidence": 1.0,
                "reason": match.reason,
            }
        rule_reason = match.reason
        if match.notes:  # a timed-out pattern: say why it did not match
            rule_reason += f" ({'; '.join(match.notes)})"
    else:
        rule_reason = "no rules"
    if classifier_on:
        verdict = classify(label=label, facts=facts, examples=examples)
        matched = verdict.answer and verdict.confidence >= label.threshold
        confidence = verdict.confidence if verdict.answer else 1 - verdict.confidence
        return {
            "key": label.key,
            "matched": matched,
            "source": "classifier",
            "confidence": round(confidence, 4),
            "reason": f"{verdict.reason} (threshold {label.threshold})",
        }
    why = rule_reason
    if label.instructions and not workspace.classifier_enabled:
        why += "; classifier disabled for the workspace"
    return {"key": label.key, "matched": False, "source": None, "confidence": 0.0, "reason": why}


def label_test(
    *,
    workspace: Workspace,
    rule_facts: rules_engine.Facts,
    facts: EmailFacts,
    draft: Label | None = None,
) -> list[dict]:
    """Runs every enabled label's rules and, where active, the classifier; stores nothing.
    An unsaved ``draft`` label (the dashboard's editor) is tested too, in place of the saved
    label with its key."""
    active = {label.pk for label in classifier_labels_of(workspace)}
    budget = Budget()  # one run's patterns together, as on receipt
    results = []
    saved_twin: Label | None = None
    for label in Label.objects.filter(workspace=workspace).order_by("key"):
        if draft is not None and label.key == draft.key:
            saved_twin = label
            continue
        if not label.enabled:
            continue
        results.append(
            _test_one(
                label=label,
                workspace=workspace,
                classifier_on=label.pk in active,
                rule_facts=rule_facts,
                facts=facts,
                budget=budget,
            )
        )
    if draft is not None:
        classifier_on = workspace.classifier_enabled and bool(draft.instructions.strip())
        results.append(
            _test_one(
                label=draft,
                workspace=workspace,
                classifier_on=classifier_on,
                rule_facts=rule_facts,
                facts=facts,
                budget=budget,
                examples=examples_for(saved_twin) if saved_twin and classifier_on else [],
            )
        )
        results.sort(key=lambda result: result["key"])
    return results

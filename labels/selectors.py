"""Reads of labels, their examples and (by string reference) the emails they are tested on."""

from __future__ import annotations

from collections.abc import Iterable

from django.db import models
from django.db.models import Count, QuerySet

from apikeys.models import Workspace
from config.api.errors import NotFound
from config.rows import placeholders, select_rows
from labels.classifier.base import EmailFacts, Example
from labels.exceptions import UnknownLabel
from labels.models import EmailLabel, Label, LabelFeedback

MAX_EXAMPLES_PER_SIDE = 50


def label_list(workspace: Workspace) -> QuerySet[Label]:
    return Label.objects.filter(workspace=workspace)


def label_get(workspace: Workspace, key: str) -> Label:
    label = Label.objects.filter(workspace=workspace, key=key).first()
    if label is None:
        raise NotFound("No such label.")
    return label


def labels_by_keys(
    workspace: Workspace, keys: Iterable[str], *, path: str = "labels"
) -> list[Label]:
    """The workspace's labels with these keys, in the given order; unknown keys → unknown_label."""
    wanted = list(dict.fromkeys(keys))
    found = {lbl.key: lbl for lbl in Label.objects.filter(workspace=workspace, key__in=wanted)}
    missing = [key for key in wanted if key not in found]
    if missing:
        raise UnknownLabel(
            f"Unknown label key(s): {', '.join(missing)}.",
            issues=[{"path": path, "message": f"Unknown label '{key}'."} for key in missing],
        )
    return [found[key] for key in wanted]


def labels_of_email(email: models.Model) -> list[dict]:
    """``[{key, source, confidence}]`` of one email (a ``mail.Email``), oldest first."""
    return [
        {"key": row.key, "source": row.source, "confidence": row.confidence}
        for row in EmailLabel.objects.filter(email=email).order_by("created_at", "pk")
    ]


def enabled_labels(workspace_id: str) -> list[Label]:
    """The workspace's enabled labels, read once per received message (rules and classifier)."""
    return list(Label.objects.filter(workspace_id=workspace_id, enabled=True))


def enabled_labels_of(workspace_ids: Iterable[str]) -> list[Label]:
    """The enabled labels of several workspaces in one read (the receive path's batches)."""
    ids = sorted(workspace_ids)
    if not ids:
        return []
    where = f"workspace_id IN ({placeholders(len(ids))}) AND enabled = %s"
    return select_rows(Label, where, [*ids, True])  # once per batch: see config.rows


def classifier_labels(workspace: Workspace) -> list[Label]:
    """Labels the classifier answers for: enabled, with instructions, classifier switched on."""
    if not workspace.classifier_enabled:
        return []
    return list(Label.objects.filter(workspace=workspace, enabled=True).exclude(instructions=""))


def examples_for(label: Label) -> list[Example]:
    """The label's training examples (people's decisions), newest first, capped per side."""
    rows: list[LabelFeedback] = []
    for positive in (True, False):
        rows += list(
            LabelFeedback.objects.filter(label=label, positive=positive).order_by("-id")[
                :MAX_EXAMPLES_PER_SIDE
            ]
        )
    return [
        Example(
            email=EmailFacts(
                from_address=row.from_address,
                from_name=row.from_name,
                subject=row.subject,
                text=row.text,
                signals=frozenset(row.signals or ()),
            ),
            positive=row.positive,
        )
        for row in sorted(rows, key=lambda r: r.pk)
    ]


def example_page(
    label: Label, *, limit: int, after: str | None = None
) -> tuple[list[LabelFeedback], str | None]:
    """One page of the label's training examples (explicit ones, manual labels and removals),
    newest first by their ``lex_`` id (``GET /labels/{key}/examples``), and the id to continue
    after when there are more."""
    rows = LabelFeedback.objects.filter(label=label).order_by("-public_id")
    if after:
        rows = rows.filter(public_id__lt=after)
    page = list(rows[: limit + 1])
    if len(page) > limit:
        return page[:limit], page[limit - 1].public_id
    return page, None


def example_get(label: Label, example_id: str) -> LabelFeedback:
    """One example of the label by its ``lex_`` id, or not_found (never another label's)."""
    example = LabelFeedback.objects.filter(label=label, public_id=example_id).first()
    if example is None:
        raise NotFound("No such example.")
    return example


def label_list_with_counts(workspace: Workspace) -> QuerySet[Label]:
    """The workspace's labels by key, each with ``email_count`` (emails carrying it)."""
    return (
        Label.objects.filter(workspace=workspace)
        .annotate(email_count=Count("applications"))
        .order_by("key")
    )


def examples_of_email(workspace: Workspace, email_id: str) -> dict[str, LabelFeedback]:
    """The workspace's training examples about one email, by label key (the email view)."""
    rows = LabelFeedback.objects.filter(label__workspace=workspace, email_id=email_id)
    return {row.label.key: row for row in rows.select_related("label")}

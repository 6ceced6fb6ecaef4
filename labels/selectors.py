"""Reads of labels."""

from __future__ import annotations

from collections.abc import Iterable

from apikeys.models import Workspace
from labels.exceptions import UnknownLabel
from labels.models import EmailLabel, Label


def labels_by_keys(
    workspace: Workspace, keys: Iterable[str], *, path: str = "labels"
) -> list[Label]:
    """The workspace's labels with these keys, in the given order; unknown keys → unknown_label."""
    wanted = list(dict.fromkeys(keys))
    found = {
        label.key: label for label in Label.objects.filter(workspace=workspace, key__in=wanted)
    }
    missing = [key for key in wanted if key not in found]
    if missing:
        raise UnknownLabel(
            f"Unknown label key(s): {', '.join(missing)}.",
            issues=[{"path": path, "message": f"Unknown label '{key}'."} for key in missing],
        )
    return [found[key] for key in wanted]


def labels_of_email(email_id: str) -> list[dict]:
    """``[{key, source, confidence}]`` of one email, oldest first."""
    return [
        {"key": row.key, "source": row.source, "confidence": row.confidence}
        for row in EmailLabel.objects.filter(email_id=email_id).order_by("created_at", "pk")
    ]

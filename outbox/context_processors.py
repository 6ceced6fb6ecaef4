"""Template context of every dashboard page that the outbox owns: the approvals badge."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from apikeys.dashboard import current_membership
from outbox.selectors import outbox_pending_count


def pending_approvals(request: HttpRequest) -> dict[str, Any]:
    """``pending_approvals``: the workspace's outgoing messages waiting for a decision."""
    if not getattr(request, "user", None) or not request.user.is_authenticated:
        return {"pending_approvals": 0}
    membership = current_membership(request)
    return {"pending_approvals": outbox_pending_count(membership.workspace) if membership else 0}

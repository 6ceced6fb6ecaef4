"""Template context of every dashboard page: the current workspace, the switcher, the badge."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from apikeys import selectors
from apikeys.dashboard import current_membership


def workspace(request: HttpRequest) -> dict[str, Any]:
    """``membership``, ``memberships``, ``pending_approvals`` and ``nav_section``."""
    section = request.path.strip("/").split("/", 1)[0]
    if not getattr(request, "user", None) or not request.user.is_authenticated:
        return {
            "membership": None,
            "memberships": [],
            "pending_approvals": 0,
            "nav_section": section,
        }
    # The dashboard chrome sits above the apps; a local import keeps apikeys' module graph
    # (which the other apps import) free of outbox.
    from outbox.selectors import outbox_pending_count

    membership = current_membership(request)
    return {
        "membership": membership,
        "memberships": list(selectors.memberships_of(request.user)),
        "pending_approvals": outbox_pending_count(membership.workspace) if membership else 0,
        "nav_section": section,
    }

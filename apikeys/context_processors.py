"""Template context of every dashboard page: the current workspace, the switcher, the section and
the navigation (``apikeys.navigation``)."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from apikeys import selectors
from apikeys.dashboard import current_membership
from apikeys.navigation import entries_for


def workspace(request: HttpRequest) -> dict[str, Any]:
    """``membership``, ``memberships``, ``nav_section`` and ``nav`` (the links this member's role
    sees; the outbox adds the approvals badge: ``outbox.context_processors``)."""
    section = request.path.strip("/").split("/", 1)[0]
    if not getattr(request, "user", None) or not request.user.is_authenticated:
        return {"membership": None, "memberships": [], "nav_section": section, "nav": []}
    membership = current_membership(request)
    return {
        "membership": membership,
        "memberships": list(selectors.memberships_of(request.user)),
        "nav_section": section,
        "nav": entries_for(membership.role if membership else None, section),
    }

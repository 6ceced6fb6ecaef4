"""Template context of every dashboard page: the current workspace, the switcher, the section."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from apikeys import selectors
from apikeys.dashboard import current_membership


def workspace(request: HttpRequest) -> dict[str, Any]:
    """``membership``, ``memberships`` and ``nav_section`` (the outbox adds its badge:
    ``outbox.context_processors``)."""
    section = request.path.strip("/").split("/", 1)[0]
    if not getattr(request, "user", None) or not request.user.is_authenticated:
        return {"membership": None, "memberships": [], "nav_section": section}
    return {
        "membership": current_membership(request),
        "memberships": list(selectors.memberships_of(request.user)),
        "nav_section": section,
    }

"""The dashboard's main navigation: one list of entries, each with the role condition it needs.

``base.html`` renders :func:`entries_for` (through ``apikeys.context_processors.workspace``). A new
page adds one :class:`NavEntry` to :data:`NAV`; who sees it is said by ``scope``, asked of the one
place that says what a role may do (``apikeys.models.role_may``), never by comparing role names.
"""

from __future__ import annotations

from dataclasses import dataclass

from apikeys.models import role_may


@dataclass(frozen=True)
class NavEntry:
    """A link of the main navigation.

    ``sections``: the first path segments of the pages it is current on; ``scope``: the API scope
    a member's role must carry to see it (``None``: every member); ``badge``: the name of the
    template count shown beside it when non-zero (``pending_approvals`` is the one the outbox's
    context processor provides).
    """

    label: str
    path: str
    sections: tuple[str, ...]
    scope: str | None = None
    badge: str = ""


# Domains and Members are pages every member may open (read-only for members); the navigation
# names them to the roles that manage them, the others reach them from Inboxes and Settings.
NAV: tuple[NavEntry, ...] = (
    NavEntry("Overview", "/", ("",)),
    NavEntry("Inboxes", "/inboxes/", ("inboxes", "emails")),
    NavEntry("Domains", "/domains/", ("domains",), scope="admin"),
    NavEntry("Approvals", "/approvals/", ("approvals",), badge="pending_approvals"),
    NavEntry("Keys", "/keys/", ("keys",)),
    NavEntry("Connect an agent", "/connect/", ("connect",)),
    NavEntry("Labels", "/labels/", ("labels",)),
    NavEntry("Webhooks", "/webhooks/", ("webhooks",)),
    NavEntry("Members", "/members/", ("members",), scope="admin"),
    NavEntry("Settings", "/settings/", ("settings",)),
    NavEntry("Audit log", "/audit/", ("audit",), scope="admin"),
)


@dataclass(frozen=True)
class NavLink:
    """An entry as one page shows it."""

    entry: NavEntry
    current: bool


def entries_for(role: str | None, section: str) -> list[NavLink]:
    """The entries a member with ``role`` sees, the one for ``section`` marked current."""
    return [
        NavLink(entry=entry, current=section in entry.sections)
        for entry in NAV
        if entry.scope is None or role_may(role, entry.scope)
    ]

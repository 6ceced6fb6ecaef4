"""Reads of domains and inboxes."""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings

from apikeys.models import Workspace
from inboxes.exceptions import InvalidDomain, NoDomain
from inboxes.models import Domain


@dataclass(frozen=True)
class DomainInfo:
    domain: str
    shared: bool
    catch_all: bool
    default: bool


def domain_list(workspace: Workspace) -> list[DomainInfo]:
    """Shared domains first (the first of them is the default), then the workspace's own."""
    names = list(dict.fromkeys(settings.INBOX_DOMAINS))
    custom = list(Domain.objects.filter(workspace=workspace).exclude(domain__in=names))
    rows = [DomainInfo(d, True, False, False) for d in names]
    rows += [DomainInfo(d.domain, False, d.catch_all, False) for d in custom]
    if rows:
        first = rows[0]
        rows[0] = DomainInfo(first.domain, first.shared, first.catch_all, True)
    return rows


def domain_resolve(workspace: Workspace, name: str | None) -> DomainInfo:
    """The domain a new inbox gets: ``name`` if the workspace may use it, else the default."""
    rows = domain_list(workspace)
    if not rows:
        raise NoDomain()
    if name is None or name == "":
        return rows[0]
    wanted = name.strip().lower().rstrip(".")
    for row in rows:
        if row.domain == wanted:
            return row
    raise InvalidDomain(f"The domain '{name}' is not available to this workspace.")

"""Writes of domains and inboxes."""

from __future__ import annotations

from django.conf import settings

from apikeys.models import Workspace
from config.api.errors import ValidationFailed
from inboxes.exceptions import InvalidDomain
from inboxes.models import Domain


def domain_add(*, workspace: Workspace, domain: str, catch_all: bool = False) -> Domain:
    """Gives the workspace a custom domain (idempotent for the same workspace)."""
    name = domain.strip().lower().rstrip(".")
    if not name or "." not in name or len(name) > 253:
        raise ValidationFailed.at("domain", "Not a domain name.")
    if name in settings.INBOX_DOMAINS:
        raise InvalidDomain(f"'{name}' is a shared domain of this instance.")
    existing = Domain.objects.filter(domain=name).first()
    if existing is not None:
        if existing.workspace_id != workspace.pk:
            raise InvalidDomain(f"'{name}' belongs to another workspace.")
        if existing.catch_all != catch_all:
            existing.catch_all = catch_all
            existing.save(update_fields=["catch_all"])
        return existing
    return Domain.objects.create(workspace=workspace, domain=name, catch_all=catch_all)

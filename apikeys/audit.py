"""The audit log's writer: who changed what, written in the transaction of the change.

Every write service that changes something a person or key asked for takes ``by``, an
:class:`Actor` (the API key or user behind the request and its client address, made by
:func:`actor_of` in the view, the API or the MCP tool), and calls :func:`record` inside its own
``transaction.atomic`` block, so the entry commits with the change or not at all. Nothing else
writes :class:`~apikeys.models.AuditEntry` rows, nothing updates them, and only :func:`prune`
(the retention sweep, ``apikeys.prune_audit`` on beat) deletes them.

The module lives in ``apikeys`` (services level): every app that changes something a person
asked for (inboxes, labels, outbox, webhooks) sits above it in the layers, and so may call it.

What an entry keeps of the change is an allow-list per target type (:data:`FIELDS`): a field not
listed is dropped, so a secret (a key, a password, a webhook signing secret, an invitation link)
cannot reach the log by a later change to a caller. Webhook URLs are kept as their origin only,
since a receiver's URL path often is its credential (``hooks.example.com/services/T0/B0/XYZ``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from apikeys.models import ApiKey, AuditEntry, Membership, Workspace
from apikeys.principal import Principal
from apikeys.signin import client_address

# The documented vocabulary (docs/security.md lists it): ``<target type>.<what happened>``.
ACTIONS: frozenset[str] = frozenset(
    {
        "key.created",
        "key.updated",
        "key.revoked",
        "invitation.created",
        "invitation.revoked",
        "member.added",
        "member.role_changed",
        "member.removed",
        "workspace.updated",
        "domain.added",
        "domain.updated",
        "domain.removed",
        "label.created",
        "label.updated",
        "label.deleted",
        "label.example_added",
        "label.example_removed",
        "webhook.created",
        "webhook.updated",
        "webhook.deleted",
        "inbox.deleted",
        "smtp_credential.created",
        "smtp_credential.revoked",
        "outbox.approved",
        "outbox.rejected",
        "user.signed_in",
        "user.sign_in_failed",
        "user.password_changed",
    }
)

# What an entry may keep of each target type's fields: nothing else is ever written.
FIELDS: Mapping[str, frozenset[str]] = {
    "key": frozenset({"name", "kind", "scopes", "require_approval", "expires_at"}),
    "invitation": frozenset({"email", "role"}),
    "member": frozenset({"role"}),
    "workspace": frozenset(
        {
            "name",
            "require_approval",
            "classifier_enabled",
            "allow_permanent_inboxes",
            "audit_retention_days",
        }
    ),
    "domain": frozenset({"domain", "catch_all"}),
    "label": frozenset(
        {"key", "name", "color", "instructions", "threshold", "rules", "enabled", "example"}
    ),
    "webhook": frozenset({"url", "events", "inbox_ids", "label_keys", "enabled"}),
    "inbox": frozenset({"address"}),
    "smtp_credential": frozenset({"username", "name", "inbox"}),
    "outbox_item": frozenset({"to", "subject", "note", "edited"}),
    "user": frozenset(),
}

DEFAULT_RETENTION_DAYS = 365  # entries with no workspace (a failed sign-in of no known account)
_PRUNE_BATCH = 1000


@dataclass(frozen=True)
class Actor:
    """Who made a change: ``type`` is ``key``, ``user``, ``system`` (an operator's command) or
    ``anonymous`` (a failed sign-in); ``ip`` the client address the server saw."""

    type: str
    id: str = ""
    name: str = ""
    ip: str | None = None

    @classmethod
    def of_key(cls, key: ApiKey, ip: str | None = None) -> Actor:
        return cls("key", str(key.pk), key.name, ip)

    @classmethod
    def of_user(cls, user: AbstractBaseUser, ip: str | None = None) -> Actor:
        return cls("user", str(user.pk), user.get_username(), ip)

    @classmethod
    def of_principal(cls, principal: Principal, ip: str | None = None) -> Actor:
        if principal.key is not None:
            return cls.of_key(principal.key, ip)
        return cls.of_user(principal.user, ip)

    @classmethod
    def system(cls, name: str) -> Actor:
        """The operator at the command line (``manage.py bootstrap``, ``createkey``)."""
        return cls("system", "", name, None)


def actor_of(request: Any) -> Actor:
    """The actor of a dashboard or API request: its API key, else its signed-in user."""
    ip = client_address(request)
    principal = getattr(request, "auth", None)
    if isinstance(principal, Principal):
        return Actor.of_principal(principal, ip)
    return Actor.of_user(request.user, ip)


@dataclass(frozen=True)
class Target:
    type: str
    id: str
    name: str = ""


def _plain(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def url_origin(url: str) -> str:
    """``scheme://host[:port]`` of a webhook URL (its path and query may be its credential),
    without any user information; whatever the URL's shape, never more of it."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return ""
    host = parts.netloc.rsplit("@", 1)[-1]
    return f"{parts.scheme}://{host}" if parts.scheme else ""


def _allowed(target_type: str, changes: Mapping[str, Any]) -> dict[str, Any]:
    allowed = FIELDS.get(target_type, frozenset())
    out: dict[str, Any] = {}
    for field, change in changes.items():
        if field not in allowed:
            continue
        if target_type == "webhook" and field == "url":
            change = {k: url_origin(v) if isinstance(v, str) else v for k, v in change.items()}
        out[field] = {k: _plain(v) for k, v in change.items()}
    return out


def created(obj: Any, fields: Iterable[str]) -> dict[str, dict[str, Any]]:
    """The ``changes`` of a new object: each field's value as ``after``."""
    return {f: {"after": getattr(obj, f)} for f in fields}


def diff(before: Mapping[str, Any], after: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The ``changes`` between two snapshots: the fields whose value differs."""
    return {
        f: {"before": before.get(f), "after": v} for f, v in after.items() if before.get(f) != v
    }


def record(
    *,
    workspace: Workspace | str | None,
    by: Actor,
    action: str,
    target: Target,
    changes: Mapping[str, Mapping[str, Any]] | None = None,
) -> AuditEntry:
    """Appends one entry; call it inside the transaction of the change it records."""
    if action not in ACTIONS:
        raise ValueError(f"{action!r} is not in the audit vocabulary (apikeys.audit.ACTIONS).")
    workspace_id = workspace.pk if isinstance(workspace, Workspace) else workspace
    return AuditEntry.objects.create(
        workspace_id=workspace_id,
        actor_type=by.type,
        actor_id=by.id[:64],
        actor_name=by.name[:254],
        action=action,
        target_type=target.type,
        target_id=str(target.id)[:64],
        target_name=(target.name or "")[:254],
        changes=_allowed(target.type, changes or {}),
        ip=by.ip,
    )


def _account_workspaces(user: AbstractBaseUser) -> list[str]:
    return list(
        Membership.objects.filter(user=user)
        .order_by("workspace_id")
        .values_list("workspace_id", flat=True)
    )


def record_account(*, user: AbstractBaseUser, by: Actor, action: str) -> int:
    """An account's own event (sign-in, password change): one entry in each workspace the
    account belongs to, where that workspace's owners and admins see it."""
    target = Target("user", str(user.pk), user.get_username())
    workspaces = _account_workspaces(user)
    with transaction.atomic():
        for workspace_id in workspaces:
            record(workspace=workspace_id, by=by, action=action, target=target)
    return len(workspaces)


def sign_in_succeeded(*, user: AbstractBaseUser, ip: str | None) -> int:
    """Records a successful dashboard sign-in."""
    return record_account(user=user, by=Actor.of_user(user, ip), action="user.signed_in")


def sign_in_failed(*, user: AbstractBaseUser | None, ip: str | None) -> int:
    """Records a refused sign-in: into the account's workspaces when the name is an account's,
    else once with no workspace. The name typed is not kept when it is nobody's (people type
    passwords into the name field), and the password typed never is."""
    if user is not None:
        return record_account(
            user=user,
            by=Actor("anonymous", "", "", ip),
            action="user.sign_in_failed",
        )
    record(
        workspace=None,
        by=Actor("anonymous", "", "", ip),
        action="user.sign_in_failed",
        target=Target("user", "", "(no such account)"),
    )
    return 1


def prune(*, now: datetime | None = None) -> int:
    """Deletes entries older than their workspace's ``audit_retention_days``, in batches (the
    only deletion of the log)."""
    now = now or timezone.now()
    deleted = 0
    cut_offs: list[tuple[str | None, datetime]] = [
        (pk, now - timedelta(days=days))
        for pk, days in Workspace.objects.values_list("pk", "audit_retention_days")
    ]
    cut_offs.append((None, now - timedelta(days=DEFAULT_RETENTION_DAYS)))
    for workspace_id, cut_off in cut_offs:
        while True:
            if workspace_id is None:  # the operator's entries: no workspace to scope by
                old = AuditEntry.objects.unscoped().filter(workspace__isnull=True)
            else:
                old = AuditEntry.objects.filter(workspace_id=workspace_id)
            ids = list(
                old.filter(created_at__lt=cut_off).values_list("pk", flat=True)[:_PRUNE_BATCH]
            )
            if not ids:
                break
            deleted += old.filter(pk__in=ids).delete()[0]
    return deleted

"""Reads of workspaces, memberships and keys. Every tenant lookup goes through here."""

from __future__ import annotations

import hmac

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Case, QuerySet, Value, When
from django.utils import timezone

from apikeys import tokens
from apikeys.exceptions import InvalidKey, KeyExpired, KeyRevoked
from apikeys.models import ApiKey, Membership, Role, Workspace
from config.api.errors import NotFound, Unauthorized


def api_key_list(workspace: Workspace) -> QuerySet[ApiKey]:
    """The workspace's keys that are not revoked."""
    return ApiKey.objects.filter(workspace=workspace, revoked_at__isnull=True)


def api_key_revoked_list(workspace: Workspace, *, limit: int = 20) -> QuerySet[ApiKey]:
    """The workspace's most recently revoked keys (the dashboard's history of revocations)."""
    return ApiKey.objects.filter(workspace=workspace, revoked_at__isnull=False).order_by(
        "-revoked_at"
    )[:limit]


def api_key_get(workspace: Workspace, key_id: str) -> ApiKey:
    """One active key of the workspace, or not_found."""
    key = api_key_list(workspace).filter(pk=key_id).first()
    if key is None:
        raise NotFound("No such API key.")
    return key


def api_key_for_plain(plain: str) -> ApiKey:
    """The active key behind a plain key, or an ``unauthorized`` error saying why."""
    if not tokens.is_well_formed(plain):
        raise InvalidKey()
    wanted = tokens.digest(plain)
    # Authentication: the key names its workspace, so the lookup is across all of them.
    candidates = (
        ApiKey.objects.unscoped()
        .select_related("workspace")
        .filter(prefix=tokens.lookup_prefix(plain))
    )
    for key in candidates:
        if hmac.compare_digest(key.digest, wanted):
            if key.revoked_at is not None:
                raise KeyRevoked()
            if key.expires_at is not None and key.expires_at <= timezone.now():
                raise KeyExpired()
            return key
    raise InvalidKey()


def api_keys_invalid(keys: list[tuple[str, str]]) -> dict[str, Unauthorized]:
    """Of these ``(workspace id, key id)`` pairs, the keys that no longer authenticate, each
    with the error a request made with it now gets (revoked, expired, or deleted)."""
    if not keys:
        return {}
    now = timezone.now()
    rows = ApiKey.objects.filter(
        workspace_id__in={workspace_id for workspace_id, _ in keys},
        pk__in={key_id for _, key_id in keys},
    ).values_list("pk", "revoked_at", "expires_at")
    found = {pk: (revoked_at, expires_at) for pk, revoked_at, expires_at in rows}
    out: dict[str, Unauthorized] = {}
    for _, key_id in keys:
        if key_id not in found:
            out[key_id] = InvalidKey()
            continue
        revoked_at, expires_at = found[key_id]
        if revoked_at is not None:
            out[key_id] = KeyRevoked()
        elif expires_at is not None and expires_at <= now:
            out[key_id] = KeyExpired()
    return out


def membership_for(user: AbstractBaseUser, workspace_id: str | None) -> Membership | None:
    """The user's membership in ``workspace_id``, else in their oldest workspace."""
    memberships = Membership.objects.select_related("workspace").filter(user=user)
    if workspace_id:
        chosen = memberships.filter(workspace_id=workspace_id).first()
        if chosen is not None:
            return chosen
    return memberships.order_by("created_at", "pk").first()


def memberships_of(user: AbstractBaseUser) -> QuerySet[Membership]:
    """All of the user's memberships, oldest first (the workspace switcher)."""
    return Membership.objects.select_related("workspace").filter(user=user).order_by("created_at")


def membership_list(workspace: Workspace) -> QuerySet[Membership]:
    """The workspace's members, owners first, then admins, then members, each by e-mail."""
    order = Case(
        When(role=Role.OWNER, then=Value(0)),
        When(role=Role.ADMIN, then=Value(1)),
        default=Value(2),
    )
    return (
        Membership.objects.select_related("user")
        .filter(workspace=workspace)
        .order_by(order, "user__username")
    )


def membership_get(workspace: Workspace, membership_id: int | str) -> Membership:
    """One membership of the workspace, or not_found."""
    try:
        pk = int(membership_id)
    except (TypeError, ValueError):
        raise NotFound("No such member.") from None
    membership = membership_list(workspace).filter(pk=pk).first()
    if membership is None:
        raise NotFound("No such member.")
    return membership


def membership_in(user: AbstractBaseUser, workspace_id: str) -> Membership | None:
    """The user's membership in exactly ``workspace_id`` (no fallback), or None."""
    return memberships_of(user).filter(workspace_id=workspace_id).first()

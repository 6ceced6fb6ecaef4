"""Reads of workspaces, memberships and keys. Every tenant lookup goes through here."""

from __future__ import annotations

import hmac
from datetime import datetime

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Case, QuerySet, Value, When
from django.utils import timezone

from apikeys import tokens
from apikeys.exceptions import InvalidKey, InvitationNotValid, KeyExpired, KeyRevoked
from apikeys.models import (
    ApiKey,
    AuditEntry,
    Invitation,
    Membership,
    Role,
    Workspace,
    may_manage,
)
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


def invitation_list_pending(workspace: Workspace) -> QuerySet[Invitation]:
    """The workspace's invitations that can still be accepted, newest first."""
    return (
        Invitation.objects.select_related("invited_by")
        .filter(
            workspace=workspace,
            accepted_at__isnull=True,
            revoked_at__isnull=True,
            expires_at__gt=timezone.now(),
        )
        .order_by("-created_at", "-pk")
    )


def invitation_get(workspace: Workspace, invitation_id: int | str) -> Invitation:
    """One invitation of the workspace, or not_found."""
    try:
        pk = int(invitation_id)
    except (TypeError, ValueError):
        raise NotFound("No such invitation.") from None
    invitation = Invitation.objects.filter(workspace=workspace, pk=pk).first()
    if invitation is None:
        raise NotFound("No such invitation.")
    return invitation


def invitation_for_plain(plain: str) -> Invitation:
    """The invitation behind a link's secret (in any state), or ``invitation_invalid``."""
    if not tokens.is_well_formed(plain, tokens.INVITATION_PREFIX):
        raise InvitationNotValid()
    wanted = tokens.digest(plain)
    # The link names its workspace through the secret, so the lookup is across all of them.
    candidates = (
        Invitation.objects.unscoped()
        .select_related("workspace", "invited_by")
        .filter(prefix=tokens.lookup_prefix(plain))
    )
    for invitation in candidates:
        if hmac.compare_digest(invitation.digest, wanted):
            return invitation
    raise InvitationNotValid()


_NOT_VALID = {
    "accepted": "This invitation has already been used. Sign in instead.",
    "revoked": "This invitation was withdrawn. Ask the person who invited you for a new one.",
    "expired": "This invitation has expired. Ask the person who invited you for a new one.",
}


def invitation_problem(invitation: Invitation) -> str | None:
    """Why the invitation cannot be accepted now (in plain words), or None when it can."""
    state = invitation.state()
    if state != "pending":
        return _NOT_VALID[state]
    # An invitation speaks for its inviter: one who left, or lost the right to invite to this
    # role, since cannot let anybody in any more.
    inviter_role = (
        Membership.objects.filter(
            workspace_id=invitation.workspace_id, user_id=invitation.invited_by_id
        )
        .values_list("role", flat=True)
        .first()
        if invitation.invited_by_id is not None
        else None
    )
    if inviter_role is None or not may_manage(inviter_role, invitation.role):
        return (
            "The person who invited you can no longer add people to this workspace. "
            "Ask an owner or admin there for a new invitation."
        )
    return None


def user_by_name(name: str) -> AbstractBaseUser | None:
    """The account whose user name (its lower-case e-mail) is ``name``, if any."""
    return get_user_model().objects.filter(username=name.strip().lower()).first()


def audit_list(
    workspace: Workspace,
    *,
    actor: str | None = None,
    action: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
) -> QuerySet[AuditEntry]:
    """The workspace's audit log, filtered: ``actor`` is a key or user id (or ``system`` /
    ``anonymous``), ``action`` an exact action or a prefix ending in ``.`` (``key.``), ``since``
    inclusive and ``until`` exclusive."""
    rows = AuditEntry.objects.filter(workspace=workspace)
    if actor:
        if actor in ("system", "anonymous"):
            rows = rows.filter(actor_type=actor)
        else:
            rows = rows.filter(actor_id=actor)
    if action:
        rows = (
            rows.filter(action__startswith=action)
            if action.endswith(".")
            else rows.filter(action=action)
        )
    if since is not None:
        rows = rows.filter(created_at__gte=since)
    if until is not None:
        rows = rows.filter(created_at__lt=until)
    return rows

"""Writes of workspaces, users, memberships and keys."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from apikeys import tokens
from apikeys.exceptions import AlreadyMember, LastOwner, RoleNotAllowed
from apikeys.models import ApiKey, KeyKind, Membership, Role, Workspace
from config.api.errors import Forbidden, NotFound, ValidationFailed

ALL_SCOPES = ("read", "write", "send", "admin")

# A key's last-used time is written at most this often, so authentication stays a read.
_LAST_USED_GRANULARITY = timedelta(seconds=60)


def workspace_get_or_create(*, name: str, require_approval: bool = False) -> Workspace:
    """The workspace with this name (the oldest one if several), created when missing."""
    workspace = Workspace.objects.filter(name=name).order_by("created_at").first()
    if workspace is None:
        workspace = Workspace.objects.create(name=name, require_approval=require_approval)
    elif require_approval and not workspace.require_approval:
        workspace.require_approval = True
        workspace.save(update_fields=["require_approval"])
    return workspace


def user_get_or_create(*, email: str, password: str | None = None) -> AbstractBaseUser:
    """A dashboard user whose user name is their e-mail address; sets the password if given."""
    User = get_user_model()
    email = email.strip().lower()
    user, _ = User.objects.get_or_create(username=email, defaults={"email": email})
    if password is not None:
        user.set_password(password)
        user.save(update_fields=["password"])
    return user


def membership_set(*, workspace: Workspace, user: AbstractBaseUser, role: str) -> Membership:
    """Adds the user to the workspace with ``role``, or changes their role."""
    membership, created = Membership.objects.get_or_create(
        workspace=workspace, user=user, defaults={"role": role}
    )
    if not created and membership.role != role:
        membership.role = role
        membership.save(update_fields=["role"])
    return membership


_MANAGERS = (Role.OWNER, Role.ADMIN)


def _check_manager(actor: Membership, workspace: Workspace) -> None:
    if actor.workspace_id != workspace.pk:
        raise NotFound("No such member.")
    if actor.role not in _MANAGERS:
        raise Forbidden("Only owners and admins can manage the members of a workspace.")


def _check_role(role: str) -> None:
    if role not in Role.values:
        raise ValidationFailed.at("role", f"Choose one of {', '.join(Role.values)}.")


def _lock_owners(workspace: Workspace) -> list[int]:
    """Locks the workspace's owner rows (so two demotions cannot both pass) and lists their ids."""
    return list(
        Membership.objects.select_for_update()
        .filter(workspace=workspace, role=Role.OWNER)
        .order_by("pk")
        .values_list("pk", flat=True)
    )


def membership_add(
    *, actor: Membership, email: str, role: str, password: str | None = None
) -> Membership:
    """Adds a person to the actor's workspace by e-mail, creating the user when new.

    Owners and admins may add members; only owners may add owners. The password is used only
    for a new user: an existing account keeps its own, so no admin can take over someone's login.
    """
    workspace = actor.workspace
    _check_manager(actor, workspace)
    _check_role(role)
    if role == Role.OWNER and actor.role != Role.OWNER:
        raise RoleNotAllowed()
    email = email.strip().lower()
    if not email or "@" not in email:
        raise ValidationFailed.at("email", "Enter the person's e-mail address.")
    User = get_user_model()
    with transaction.atomic():
        user = User.objects.filter(username=email).first()
        if user is None:
            if not password:
                raise ValidationFailed.at("password", "Set a first password for a new user.")
            user = user_get_or_create(email=email, password=password)
        elif Membership.objects.filter(workspace=workspace, user=user).exists():
            raise AlreadyMember()
        return Membership.objects.create(workspace=workspace, user=user, role=role)


def membership_role_set(*, actor: Membership, membership: Membership, role: str) -> Membership:
    """Changes a member's role; only owners grant or take away the owner role; one owner stays."""
    _check_manager(actor, membership.workspace)
    _check_role(role)
    with transaction.atomic():
        owners = _lock_owners(membership.workspace)
        membership.refresh_from_db(fields=["role"])
        if (role == Role.OWNER or membership.role == Role.OWNER) and actor.role != Role.OWNER:
            raise RoleNotAllowed()
        if membership.role == role:
            return membership
        if membership.role == Role.OWNER and owners == [membership.pk]:
            raise LastOwner()
        membership.role = role
        membership.save(update_fields=["role"])
    return membership


def membership_remove(*, actor: Membership, membership: Membership) -> None:
    """Removes a member from the workspace; only owners remove owners; one owner stays."""
    _check_manager(actor, membership.workspace)
    with transaction.atomic():
        owners = _lock_owners(membership.workspace)
        if membership.pk in owners and actor.role != Role.OWNER:
            raise RoleNotAllowed()
        if owners == [membership.pk]:
            raise LastOwner()
        Membership.objects.filter(workspace_id=membership.workspace_id, pk=membership.pk).delete()


def workspace_update(
    *,
    actor: Membership,
    name: str | None = None,
    require_approval: bool | None = None,
    classifier_enabled: bool | None = None,
    allow_permanent_inboxes: bool | None = None,
) -> Workspace:
    """Changes the actor's workspace settings (owners and admins); ``None`` leaves a field alone.

    ``max_inboxes`` is not here on purpose: it is a quota the operator sets (Django admin), not
    something the workspace grants itself. Only the changed fields are written.
    """
    if actor.role not in _MANAGERS:
        raise Forbidden("Only owners and admins can change the settings of a workspace.")
    changes: dict[str, object] = {}
    if name is not None:
        name = name.strip()
        if not name:
            raise ValidationFailed.at("name", "Give the workspace a name.")
        if len(name) > 200:
            raise ValidationFailed.at("name", "Use at most 200 characters.")
        changes["name"] = name
    for field, value in (
        ("require_approval", require_approval),
        ("classifier_enabled", classifier_enabled),
        ("allow_permanent_inboxes", allow_permanent_inboxes),
    ):
        if value is not None:
            changes[field] = bool(value)
    with transaction.atomic():
        workspace = Workspace.objects.select_for_update().get(pk=actor.workspace_id)
        changed = [f for f, v in changes.items() if getattr(workspace, f) != v]
        for field in changed:
            setattr(workspace, field, changes[field])
        if changed:
            workspace.save(update_fields=changed)
    actor.workspace = workspace
    return workspace


@dataclass(frozen=True)
class CreatedKey:
    key: ApiKey
    plain: str


def api_key_create(
    *,
    workspace: Workspace,
    name: str,
    kind: str = KeyKind.AGENT,
    scopes: list[str] | tuple[str, ...] = ("read", "write"),
    expires_in_days: int | None = None,
    require_approval: bool = False,
    created_by: AbstractBaseUser | None = None,
) -> CreatedKey:
    """A new key; the plain key exists only in the returned value."""
    plain = tokens.generate()
    ordered = [s for s in ALL_SCOPES if s in set(scopes)]
    key = ApiKey.objects.create(
        workspace=workspace,
        name=name,
        kind=kind,
        scopes=ordered,
        prefix=tokens.lookup_prefix(plain),
        digest=tokens.digest(plain),
        require_approval=require_approval,
        expires_at=(
            timezone.now() + timedelta(days=expires_in_days)
            if expires_in_days is not None
            else None
        ),
        created_by=created_by,
    )
    return CreatedKey(key=key, plain=plain)


def api_key_update(*, key: ApiKey, require_approval: bool) -> ApiKey:
    """Changes whether mail sent with the key waits for approval."""
    if key.require_approval != require_approval:
        key.require_approval = require_approval
        key.save(update_fields=["require_approval"])
    return key


def api_key_revoke(*, key: ApiKey) -> ApiKey:
    """Revokes the key at once; later requests with it are 401."""
    with transaction.atomic():
        ApiKey.objects.filter(
            workspace_id=key.workspace_id, pk=key.pk, revoked_at__isnull=True
        ).update(revoked_at=timezone.now())
    key.refresh_from_db(fields=["revoked_at"])
    return key


def api_key_touch(*, key: ApiKey) -> None:
    """Records use of the key, at most once a minute."""
    now = timezone.now()
    if key.last_used_at is None or now - key.last_used_at >= _LAST_USED_GRANULARITY:
        ApiKey.objects.filter(workspace_id=key.workspace_id, pk=key.pk).update(last_used_at=now)
        key.last_used_at = now


def bootstrap(
    *,
    workspace_name: str,
    owner_email: str,
    password: str,
    require_approval: bool = False,
) -> tuple[Workspace, AbstractBaseUser, CreatedKey]:
    """Creates (or reuses) a workspace and its owner, and a new admin key with every scope."""
    with transaction.atomic():
        workspace = workspace_get_or_create(name=workspace_name, require_approval=require_approval)
        owner = user_get_or_create(email=owner_email, password=password)
        membership_set(workspace=workspace, user=owner, role=Role.OWNER)
        created = api_key_create(
            workspace=workspace,
            name="bootstrap admin key",
            kind=KeyKind.PERSONAL,
            scopes=ALL_SCOPES,
            created_by=owner,
        )
    return workspace, owner, created

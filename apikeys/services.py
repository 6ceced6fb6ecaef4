"""Writes of workspaces, users, memberships and keys."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, NamedTuple

from django.conf import settings
from django.contrib.auth import get_user_model, password_validation
from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import ValidationError as DjangoValidationError
from django.core.mail import send_mail
from django.core.validators import validate_email
from django.db import IntegrityError, transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from apikeys import audit, tokens
from apikeys.audit import Actor, Target
from apikeys.exceptions import (
    AccountExists,
    AlreadyInvited,
    AlreadyMember,
    InvitationNotValid,
    InvitationWrongAccount,
    LastOwner,
    RoleNotAllowed,
)
from apikeys.models import (
    MAX_AGE_DAYS,
    MAX_GRACE_HOURS,
    ApiKey,
    Invitation,
    KeyKind,
    Membership,
    Role,
    Workspace,
    may_delete_workspace,
    may_manage,
    role_may,
)
from apikeys.selectors import api_key_for_plain, invitation_for_plain, invitation_problem
from config.api.errors import Forbidden, NotFound, Unauthorized, ValidationFailed
from events import services as events

ALL_SCOPES = ("read", "write", "send", "admin")

logger = logging.getLogger(__name__)

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
    """A dashboard user whose user name is their e-mail address.

    ``password`` is set only on a user created here: an existing account keeps its own (see
    :func:`user_set_password` for the operator's explicit reset).
    """
    User = get_user_model()
    email = email.strip().lower()
    user, created = User.objects.get_or_create(username=email, defaults={"email": email})
    if created and password is not None:
        user.set_password(password)
        user.save(update_fields=["password"])
    return user


def user_set_password(*, user: AbstractBaseUser, password: str, by: Actor) -> None:
    """Sets a user's password: their own change on the dashboard, or the operator's
    ``bootstrap --reset-password``; never a workspace admin's. Audited as
    ``user.password_changed`` in each of the account's workspaces."""
    with transaction.atomic():
        user.set_password(password)
        user.save(update_fields=["password"])
        audit.record_account(user=user, by=by, action="user.password_changed")


def _member_target(membership: Membership) -> Target:
    return Target("member", str(membership.pk), membership.user.get_username())


def membership_set(
    *, workspace: Workspace, user: AbstractBaseUser, role: str, by: Actor
) -> Membership:
    """Adds the user to the workspace with ``role``, or changes their role (the operator's
    ``bootstrap``)."""
    with transaction.atomic():
        membership, created = Membership.objects.get_or_create(
            workspace=workspace, user=user, defaults={"role": role}
        )
        if created:
            audit.record(
                workspace=workspace,
                by=by,
                action="member.added",
                target=_member_target(membership),
                changes={"role": {"after": role}},
            )
        elif membership.role != role:
            before = membership.role
            membership.role = role
            membership.save(update_fields=["role"])
            audit.record(
                workspace=workspace,
                by=by,
                action="member.role_changed",
                target=_member_target(membership),
                changes={"role": {"before": before, "after": role}},
            )
    return membership


def _check_manager(actor: Membership, workspace: Workspace) -> None:
    if actor.workspace_id != workspace.pk:
        raise NotFound("No such member.")
    if not role_may(actor.role, "admin"):
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


# --- invitations -----------------------------------------------------------------------------
# People join a workspace only by invitation: nobody chooses another person's password, and an
# existing account joins only after its owner signed in and accepted (issue 23).


@dataclass(frozen=True)
class CreatedInvitation:
    invitation: Invitation
    plain: str  # the link's secret: exists only in this value, shown once and mailed


def _clean_email(email: str) -> str:
    email = (email or "").strip().lower()
    try:
        validate_email(email)
    except DjangoValidationError:
        raise ValidationFailed.at("email", "Enter the person's e-mail address.") from None
    return email


def _pending(queryset: QuerySet[Invitation]) -> QuerySet[Invitation]:
    return queryset.filter(
        accepted_at__isnull=True, revoked_at__isnull=True, expires_at__gt=timezone.now()
    )


def invitation_create(*, actor: Membership, email: str, role: str, by: Actor) -> CreatedInvitation:
    """Invites ``email`` to the actor's workspace with ``role``; the plain link secret is in the
    returned value only. Who may invite whom is ``models.may_manage``."""
    workspace = actor.workspace
    _check_manager(actor, workspace)
    _check_role(role)
    if not may_manage(actor.role, role):
        raise RoleNotAllowed()
    email = _clean_email(email)
    plain = tokens.generate(tokens.INVITATION_PREFIX)
    with transaction.atomic():
        # One invitation at a time per address: the workspace row serialises two invites.
        Workspace.objects.select_for_update().filter(pk=workspace.pk).first()
        if Membership.objects.filter(workspace=workspace, user__username__iexact=email).exists():
            raise AlreadyMember()
        if _pending(Invitation.objects.filter(workspace=workspace, email=email)).exists():
            raise AlreadyInvited()
        invitation = Invitation.objects.create(
            workspace=workspace,
            email=email,
            role=role,
            prefix=tokens.lookup_prefix(plain),
            digest=tokens.digest(plain),
            invited_by=actor.user,
            expires_at=timezone.now() + timedelta(hours=settings.INVITATION_TTL_HOURS),
        )
        audit.record(
            workspace=workspace,
            by=by,
            action="invitation.created",
            target=Target("invitation", str(invitation.pk), email),
            changes=audit.created(invitation, ["email", "role"]),
        )
    return CreatedInvitation(invitation=invitation, plain=plain)


def invitation_revoke(*, actor: Membership, invitation: Invitation, by: Actor) -> Invitation:
    """Revokes a pending invitation: its link stops working at once."""
    _check_manager(actor, invitation.workspace)
    if not may_manage(actor.role, invitation.role):
        raise RoleNotAllowed("Only owners can revoke an invitation to become an owner.")
    invitation_withdraw(invitation=invitation, by=by)
    return invitation


def invitation_withdraw(*, invitation: Invitation, by: Actor) -> Invitation:
    """Revokes a pending invitation with no role check (the operator's admin; members go
    through :func:`invitation_revoke`), audited like it."""
    with transaction.atomic():
        revoked = Invitation.objects.filter(
            workspace_id=invitation.workspace_id,
            pk=invitation.pk,
            accepted_at__isnull=True,
            revoked_at__isnull=True,
        ).update(revoked_at=timezone.now())
        if revoked:
            audit.record(
                workspace=invitation.workspace_id,
                by=by,
                action="invitation.revoked",
                target=Target("invitation", str(invitation.pk), invitation.email),
            )
    invitation.refresh_from_db(fields=["revoked_at", "accepted_at"])
    return invitation


def _lock_pending(plain: str) -> Invitation:
    """The invitation behind a link, locked, if it can still be accepted; else why not."""
    found = invitation_for_plain(plain)
    invitation = (
        Invitation.objects.select_for_update()
        .select_related("workspace")
        .filter(workspace_id=found.workspace_id, pk=found.pk)
        .get()
    )
    problem = invitation_problem(invitation)
    if problem is not None:
        raise InvitationNotValid(problem)
    return invitation


def _accept(invitation: Invitation, user: AbstractBaseUser, ip: str | None) -> Membership:
    membership, created = Membership.objects.get_or_create(
        workspace=invitation.workspace, user=user, defaults={"role": invitation.role}
    )
    invitation.accepted_at = timezone.now()
    invitation.accepted_by = user
    invitation.save(update_fields=["accepted_at", "accepted_by"])
    membership.workspace = invitation.workspace
    if created:
        audit.record(
            workspace=invitation.workspace,
            by=Actor.of_user(user, ip),
            action="member.added",
            target=_member_target(membership),
            changes={"role": {"after": membership.role}},
        )
    return membership


def user_email(user: AbstractBaseUser) -> str:
    """The address an account answers to (its e-mail, else its user name), lower-case."""
    return (getattr(user, "email", "") or user.get_username()).strip().lower()


def invitation_accept(*, plain: str, user: AbstractBaseUser, ip: str | None) -> Membership:
    """A signed-in account accepts an invitation addressed to its own e-mail address."""
    with transaction.atomic():
        invitation = _lock_pending(plain)
        if user_email(user) != invitation.email:
            raise InvitationWrongAccount(
                f"This invitation is for {invitation.email}, and you are signed in as "
                f"{user.get_username()}. Sign out, then open the link again and sign in as "
                f"{invitation.email}."
            )
        return _accept(invitation, user, ip)


def account_exists(email: str) -> bool:
    """Whether an account answers to this address (as its user name or its e-mail)."""
    User = get_user_model()
    return User.objects.filter(
        Q(username__iexact=email.strip()) | Q(email__iexact=email.strip())
    ).exists()


def invitation_accept_new(*, plain: str, password: str, ip: str | None) -> Membership:
    """Creates the invitee's account with the password they chose, and joins the workspace.

    Refused when an account with the address exists: its owner signs in and accepts instead.
    """
    User = get_user_model()
    with transaction.atomic():
        invitation = _lock_pending(plain)
        if account_exists(invitation.email):
            raise AccountExists()
        candidate = User(username=invitation.email, email=invitation.email)
        try:
            password_validation.validate_password(password, user=candidate)
        except DjangoValidationError as error:
            raise ValidationFailed(
                "Choose another password.",
                issues=[{"path": "password", "message": m} for m in error.messages],
            ) from None
        try:
            with transaction.atomic():
                user = User.objects.create_user(
                    username=invitation.email, email=invitation.email, password=password
                )
        except IntegrityError:  # created a moment ago by someone else's request
            raise AccountExists() from None
        return _accept(invitation, user, ip)


def invitation_mail(*, invitation: Invitation, link: str) -> str | None:
    """Mails the link to the invitee through the configured relay (``EMAIL_URL``), as a system
    mail (not an outbox item of the workspace); returns None when the relay took it, else why
    not, for the inviter to read."""
    if not settings.INVITATION_MAIL:
        return "no outgoing mail relay is configured (EMAIL_URL)"
    inviter = invitation.invited_by.get_username() if invitation.invited_by else "Someone"
    days = settings.INVITATION_TTL_HOURS / 24
    lasting = f"{days:g} days" if days >= 1 else f"{settings.INVITATION_TTL_HOURS} hours"
    body = (
        f"{inviter} invites you to the workspace {invitation.workspace.name} on Pigeonhole, "
        f"as {invitation.role}.\n\n"
        f"Open this link to accept; you choose your own password, or sign in if you already "
        f"have an account:\n\n{link}\n\n"
        f"The link works once and expires in {lasting}. If you did not expect this, ignore it.\n"
    )
    try:
        send_mail(
            f"You are invited to {invitation.workspace.name} on Pigeonhole",
            body,
            settings.DEFAULT_FROM_EMAIL,
            [invitation.email],
            fail_silently=False,
        )
    # Any backend (SMTP relay, SES) may fail in its own way; the inviter still has the link.
    except Exception as exc:
        logger.warning("invitation %s not mailed: %s", invitation.pk, exc)
        return f"the relay refused it or could not be reached ({type(exc).__name__})"
    return None


def membership_role_set(
    *, actor: Membership, membership: Membership, role: str, by: Actor
) -> Membership:
    """Changes a member's role; only owners grant or take away the owner role; one owner stays."""
    _check_manager(actor, membership.workspace)
    _check_role(role)
    with transaction.atomic():
        owners = _lock_owners(membership.workspace)
        membership.refresh_from_db(fields=["role"])
        if not (may_manage(actor.role, role) and may_manage(actor.role, membership.role)):
            raise RoleNotAllowed()
        if membership.role == role:
            return membership
        if membership.role == Role.OWNER and owners == [membership.pk]:
            raise LastOwner()
        before = membership.role
        membership.role = role
        membership.save(update_fields=["role"])
        audit.record(
            workspace=membership.workspace_id,
            by=by,
            action="member.role_changed",
            target=_member_target(membership),
            changes={"role": {"before": before, "after": role}},
        )
    return membership


def membership_remove(*, actor: Membership, membership: Membership, by: Actor) -> None:
    """Removes a member from the workspace; only owners remove owners; one owner stays."""
    _check_manager(actor, membership.workspace)
    with transaction.atomic():
        owners = _lock_owners(membership.workspace)
        if membership.pk in owners and not may_manage(actor.role, Role.OWNER):
            raise RoleNotAllowed()
        if owners == [membership.pk]:
            raise LastOwner()
        removed, _ = Membership.objects.filter(
            workspace_id=membership.workspace_id, pk=membership.pk
        ).delete()
        if removed:
            audit.record(
                workspace=membership.workspace_id,
                by=by,
                action="member.removed",
                target=_member_target(membership),
                changes={"role": {"before": membership.role}},
            )


UNCHANGED: Any = object()


def workspace_update(
    *,
    actor: Membership,
    name: str | None = None,
    require_approval: bool | None = None,
    classifier_enabled: bool | None = None,
    allow_permanent_inboxes: bool | None = None,
    expired_inbox_grace_hours: int | None = None,
    email_retention_days: Any = UNCHANGED,
    audit_retention_days: int | None = None,
    by: Actor,
) -> Workspace:
    """Changes the actor's workspace settings (owners and admins); ``None`` leaves a field alone.

    ``max_inboxes`` is not here on purpose: it is a quota the operator sets (Django admin), not
    something the workspace grants itself. Only the changed fields are written.
    """
    if not role_may(actor.role, "admin"):
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
    if expired_inbox_grace_hours is not None:
        if not 0 <= expired_inbox_grace_hours <= MAX_GRACE_HOURS:
            raise ValidationFailed.at(
                "expired_inbox_grace_hours", f"Use 0 to {MAX_GRACE_HOURS} hours."
            )
        changes["expired_inbox_grace_hours"] = expired_inbox_grace_hours
    if email_retention_days is not UNCHANGED:
        if email_retention_days is not None and not (
            isinstance(email_retention_days, int) and 1 <= email_retention_days <= MAX_AGE_DAYS
        ):
            raise ValidationFailed.at(
                "email_retention_days", f"Use 1 to {MAX_AGE_DAYS} days, or leave it empty."
            )
        changes["email_retention_days"] = email_retention_days
    if audit_retention_days is not None:
        if not 1 <= audit_retention_days <= 3650:
            raise ValidationFailed.at("audit_retention_days", "Keep the log 1 to 3650 days.")
        changes["audit_retention_days"] = int(audit_retention_days)
    with transaction.atomic():
        workspace = Workspace.objects.select_for_update().get(pk=actor.workspace_id)
        changed = [f for f, v in changes.items() if getattr(workspace, f) != v]
        before = {f: getattr(workspace, f) for f in changed}
        for field in changed:
            setattr(workspace, field, changes[field])
        if changed:
            workspace.save(update_fields=changed)
            audit.record(
                workspace=workspace,
                by=by,
                action="workspace.updated",
                target=Target("workspace", workspace.pk, workspace.name),
                changes=audit.diff(before, {f: changes[f] for f in changed}),
            )
    actor.workspace = workspace
    return workspace


WorkspaceHook = Callable[[str], object]
_before_workspace_delete: list[WorkspaceHook] = []


def on_workspace_delete(hook: WorkspaceHook) -> WorkspaceHook:
    """Registers ``hook(workspace_id)`` to run before a workspace's row is deleted, outside any
    transaction (usable as a decorator): apps above this one empty their large tables a chunk at
    a time (mail), so the cascade that follows neither loads them nor holds long locks."""
    _before_workspace_delete.append(hook)
    return hook


def workspace_delete(*, actor: Membership, confirm: str) -> None:
    """Deletes the actor's workspace with everything in it (owners only; ``confirm`` must be its
    name). Its API keys are revoked first, in a transaction of their own, so they stop working
    at once (the next request, and every open wait or stream as soon as the key watch hears of
    the commit: ``apikeys.watch``),
    however long removing the mail then takes."""
    if not may_delete_workspace(actor.role):
        raise Forbidden("Only an owner can delete a workspace.")
    workspace = actor.workspace
    if confirm.strip() != workspace.name:
        raise ValidationFailed.at(
            "confirm", "Type the workspace's name exactly as it is shown to confirm."
        )
    with transaction.atomic():
        ApiKey.objects.filter(workspace=workspace, revoked_at__isnull=True).update(
            revoked_at=timezone.now()
        )
    for hook in _before_workspace_delete:
        hook(workspace.pk)
    with transaction.atomic():
        # No audit entry: the workspace's entries are deleted with it (their foreign key
        # cascades); a record that outlives the workspace would belong in the operator's log.
        events.forget_workspace(workspace.pk)
        Workspace.objects.filter(pk=workspace.pk).delete()


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
    by: Actor,
) -> CreatedKey:
    """A new key; the plain key exists only in the returned value."""
    plain = tokens.generate()
    ordered = [s for s in ALL_SCOPES if s in set(scopes)]
    with transaction.atomic():
        key = _api_key_insert(
            workspace, name, kind, ordered, plain, expires_in_days, require_approval, created_by
        )
        audit.record(
            workspace=workspace,
            by=by,
            action="key.created",
            target=Target("key", key.pk, key.name),
            changes=audit.created(
                key, ["name", "kind", "scopes", "require_approval", "expires_at"]
            ),
        )
    return CreatedKey(key=key, plain=plain)


def _api_key_insert(
    workspace: Workspace,
    name: str,
    kind: str,
    ordered: list[str],
    plain: str,
    expires_in_days: int | None,
    require_approval: bool,
    created_by: AbstractBaseUser | None,
) -> ApiKey:
    return ApiKey.objects.create(
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


def api_key_update(*, key: ApiKey, require_approval: bool, by: Actor) -> ApiKey:
    """Changes whether mail sent with the key waits for approval."""
    if key.require_approval != require_approval:
        with transaction.atomic():
            key.require_approval = require_approval
            key.save(update_fields=["require_approval"])
            audit.record(
                workspace=key.workspace_id,
                by=by,
                action="key.updated",
                target=Target("key", key.pk, key.name),
                changes={
                    "require_approval": {"before": not require_approval, "after": require_approval}
                },
            )
    return key


def api_key_revoke(*, key: ApiKey, by: Actor) -> ApiKey:
    """Revokes the key at once; later requests with it are 401."""
    with transaction.atomic():
        revoked = ApiKey.objects.filter(
            workspace_id=key.workspace_id, pk=key.pk, revoked_at__isnull=True
        ).update(revoked_at=timezone.now())
        if revoked:
            audit.record(
                workspace=key.workspace_id,
                by=by,
                action="key.revoked",
                target=Target("key", key.pk, key.name),
            )
    key.refresh_from_db(fields=["revoked_at"])
    return key


def api_key_touch(*, key: ApiKey) -> None:
    """Records use of the key, at most once a minute."""
    now = timezone.now()
    if key.last_used_at is None or now - key.last_used_at >= _LAST_USED_GRANULARITY:
        ApiKey.objects.filter(workspace_id=key.workspace_id, pk=key.pk).update(last_used_at=now)
        key.last_used_at = now


class Bootstrapped(NamedTuple):
    workspace: Workspace
    owner: AbstractBaseUser
    key: CreatedKey
    password_set: bool  # False: the owner's account existed and kept its own password


def user_make_superuser(*, user: AbstractBaseUser) -> None:
    """Lets the user into the Django admin with every permission (the operator's
    ``bootstrap --superuser``; ``make run`` gives it to the demo owner)."""
    if not (user.is_staff and user.is_superuser):
        user.is_staff = user.is_superuser = True
        user.save(update_fields=["is_staff", "is_superuser"])


def _admin_key_to_keep(workspace: Workspace, plain: str) -> ApiKey | None:
    """The key behind ``plain`` when it is an active admin key of this workspace (every scope),
    else None: a key from another workspace, revoked, expired or narrowed is never shown again."""
    try:
        key = api_key_for_plain(plain)
    except Unauthorized:
        return None
    if key.workspace_id != workspace.pk or tuple(key.scopes) != ALL_SCOPES:
        return None
    return key


def bootstrap(
    *,
    workspace_name: str,
    owner_email: str,
    password: str,
    require_approval: bool = False,
    reset_password: bool = False,
    superuser: bool = False,
    keep_key: str | None = None,
) -> Bootstrapped:
    """Creates (or reuses) a workspace and its owner, and a new admin key with every scope.

    The operator's command line: the password is set for a new owner account; an existing
    account keeps its own unless ``reset_password`` says the operator means to replace it.
    ``keep_key`` is a plain key an earlier run printed: while it is still an active admin key
    of this workspace it is returned again and no key is minted (``make run`` runs this on
    every start; each run used to leave one more valid admin key behind).
    """
    User = get_user_model()
    by = Actor.system("manage.py bootstrap")
    with transaction.atomic():
        workspace = workspace_get_or_create(name=workspace_name, require_approval=require_approval)
        existed = User.objects.filter(username=owner_email.strip().lower()).exists()
        owner = user_get_or_create(email=owner_email, password=password)
        password_set = not existed or reset_password
        if existed and reset_password:
            user_set_password(user=owner, password=password, by=by)
        if superuser:
            user_make_superuser(user=owner)
        membership_set(workspace=workspace, user=owner, role=Role.OWNER, by=by)
        kept = _admin_key_to_keep(workspace, keep_key) if keep_key else None
        if kept is not None:
            created = CreatedKey(key=kept, plain=keep_key or "")
        else:
            created = api_key_create(
                workspace=workspace,
                name="bootstrap admin key",
                kind=KeyKind.PERSONAL,
                scopes=ALL_SCOPES,
                created_by=owner,
                by=by,
            )
    return Bootstrapped(workspace, owner, created, password_set)

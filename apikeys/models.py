"""Workspaces own everything; users join them through memberships; API keys act for one."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver
from django.utils import timezone

from apikeys import epoch
from config.api.ids import new_id
from config.tenancy import Tenancy, TenantManager, TenantQuerySet


def _ws_id() -> str:
    return new_id("ws")


def _key_id() -> str:
    return new_id("key")


def _audit_id() -> str:
    return new_id("aud")


class Scope(models.TextChoices):
    READ = "read"
    WRITE = "write"
    SEND = "send"
    ADMIN = "admin"


# admin implies read, write and send; write implies read; send implies nothing else.
IMPLIED_SCOPES: dict[str, frozenset[str]] = {
    "read": frozenset({"read"}),
    "write": frozenset({"write", "read"}),
    "send": frozenset({"send"}),
    "admin": frozenset({"admin", "write", "read", "send"}),
}


def effective_scopes(scopes: list[str] | tuple[str, ...] | frozenset[str]) -> frozenset[str]:
    out: set[str] = set()
    for scope in scopes:
        out |= IMPLIED_SCOPES.get(scope, frozenset())
    return frozenset(out)


MAX_GRACE_HOURS = 87_600  # expired_inbox_grace_hours: up to ten years
MAX_AGE_DAYS = 36_500  # email_retention_days: up to a hundred years


class _BumpingUpdate:
    """``update()`` that bumps the credentials epoch (apikeys.epoch) unless only quiet fields
    change; ``save()`` and deletes bump it through the signals at the end of this module."""

    def update(self, **kwargs: Any) -> int:
        rows = super().update(**kwargs)  # type: ignore[misc]
        if rows:
            epoch.bump_unless_quiet(kwargs)
        return rows


class WorkspaceQuerySet(_BumpingUpdate, models.QuerySet):
    pass


class ApiKeyQuerySet(TenantQuerySet):
    on_update = staticmethod(epoch.bump_unless_quiet)  # as _BumpingUpdate, under the guard


class Workspace(models.Model):
    id = models.CharField(primary_key=True, max_length=32, default=_ws_id, editable=False)
    name = models.CharField(max_length=200)
    require_approval = models.BooleanField(
        default=False, help_text="Every email sent from this workspace waits for human approval."
    )
    allow_permanent_inboxes = models.BooleanField(default=True)
    max_inboxes = models.PositiveIntegerField(
        null=True, blank=True, help_text="Cap on inboxes; empty means unlimited."
    )
    classifier_enabled = models.BooleanField(default=True)
    # Retention (mail.services.retention_sweep): an expired inbox is deleted with its mail this
    # many hours after its expiry (0: at expiry); mail older than email_retention_days is
    # deleted from every inbox, permanent ones included (null: kept until its inbox goes).
    expired_inbox_grace_hours = models.PositiveIntegerField(
        default=168,
        db_default=168,  # as audit_retention_days: rows written by code older than the field
        help_text="Hours an expired inbox is kept before it is deleted with its mail.",
    )
    email_retention_days = models.PositiveIntegerField(
        null=True, blank=True, help_text="Mail older than this is deleted; empty keeps it."
    )
    # db_default too: rows written by code that predates the field (a rolling deploy, an older
    # migration's historical model) get it from the database.
    audit_retention_days = models.PositiveIntegerField(
        default=365,
        db_default=365,
        validators=[MinValueValidator(1), MaxValueValidator(3650)],
        help_text="Audit log entries older than this many days are deleted by a periodic sweep.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    objects = models.Manager.from_queryset(WorkspaceQuerySet)()

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return f"{self.name} ({self.id})"


class Role(models.TextChoices):
    OWNER = "owner"
    ADMIN = "admin"
    MEMBER = "member"


# What a role may do: the one place that says it. A dashboard session carries its role's API
# scopes; the API's role checks, the services and the dashboard (``apikeys.dashboard.may``) ask
# here, never compare role names themselves.
ROLE_SCOPES: dict[str, frozenset[str]] = {
    Role.OWNER: effective_scopes(["admin"]),
    Role.ADMIN: effective_scopes(["admin"]),
    Role.MEMBER: effective_scopes(["write", "send"]),
}

# The managers of a workspace (people, settings, labels, webhooks, approvals): the roles whose
# scopes carry ``admin``. Only owners grant, change or remove the owner role (``may_manage``).
MANAGER_ROLES: tuple[str, ...] = tuple(r for r, s in ROLE_SCOPES.items() if Scope.ADMIN in s)


def role_may(role: str | None, scope: str) -> bool:
    """Whether a member with ``role`` holds this API scope (``None``, no member, holds none)."""
    return scope in ROLE_SCOPES.get(role or "", frozenset())


def may_manage(actor_role: str, role: str) -> bool:
    """Whether someone with ``actor_role`` may give, change, take or invite to ``role``."""
    return actor_role in MANAGER_ROLES and (actor_role == Role.OWNER or role != Role.OWNER)


def may_delete_workspace(role: str | None) -> bool:
    """Whether a member with ``role`` may delete the workspace with everything in it."""
    return role == Role.OWNER


class Membership(models.Model):
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    role = models.CharField(max_length=10, choices=Role.choices, default=Role.MEMBER)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = TenantManager()
    tenancy = Tenancy("workspace", parents=("user",))

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["workspace", "user"], name="membership_unique")
        ]

    def __str__(self) -> str:
        return f"{self.user} in {self.workspace_id} as {self.role}"


class KeyKind(models.TextChoices):
    AGENT = "agent"
    CI = "ci"
    PERSONAL = "personal"


class ApiKey(models.Model):
    id = models.CharField(primary_key=True, max_length=32, default=_key_id, editable=False)
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="api_keys")
    name = models.CharField(max_length=200)
    kind = models.CharField(max_length=10, choices=KeyKind.choices, default=KeyKind.AGENT)
    scopes = models.JSONField(default=list)
    # Lookup by prefix (authentication), then constant-time comparison of the digest.
    prefix = models.CharField(max_length=16, db_index=True, editable=False)
    digest = models.CharField(max_length=64, editable=False)
    require_approval = models.BooleanField(default=False)
    expires_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    revoked_at = models.DateTimeField(null=True, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    objects = TenantManager.from_queryset(ApiKeyQuerySet)()
    tenancy = Tenancy("workspace")

    class Meta:
        verbose_name = "API key"
        indexes = [
            # GET /keys: the workspace's active keys, newest first.
            models.Index(fields=["workspace", "-id"], name="apikey_ws_list"),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @property
    def effective_scopes(self) -> frozenset[str]:
        return effective_scopes(self.scopes)


class Invitation(models.Model):
    """An offer to join a workspace, sent to an e-mail address as a single-use, expiring link.

    The link's secret is stored as a prefix (lookup) and a SHA-256 digest, never in clear; the
    invitee sets their own password or, with an account already, accepts after signing in.
    """

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="invitations")
    email = models.EmailField(max_length=254)
    role = models.CharField(max_length=10, choices=Role.choices, default=Role.MEMBER)
    # Lookup by prefix (the accept page), then constant-time comparison of the digest.
    prefix = models.CharField(max_length=16, db_index=True, editable=False)
    digest = models.CharField(max_length=64, editable=False)
    invited_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    accepted_at = models.DateTimeField(null=True, blank=True)
    accepted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    revoked_at = models.DateTimeField(null=True, blank=True)

    objects = TenantManager()
    tenancy = Tenancy("workspace")

    class Meta:
        indexes = [
            # The members page: a workspace's pending invitations; one pending per address.
            models.Index(fields=["workspace", "email"], name="invitation_ws_email"),
        ]

    def __str__(self) -> str:
        return f"{self.email} to {self.workspace_id} as {self.role}"

    def state(self, now: datetime | None = None) -> str:
        """``accepted``, ``revoked``, ``expired`` or ``pending``."""
        if self.accepted_at is not None:
            return "accepted"
        if self.revoked_at is not None:
            return "revoked"
        if self.expires_at <= (now or timezone.now()):
            return "expired"
        return "pending"


class AuditEntry(models.Model):
    """One change a person or key made (``apikeys.audit.record`` writes it, in the change's
    transaction). Append-only: a saved entry is never updated; only the retention sweep
    (``apikeys.audit.prune``) deletes. The actor and target are copied in (type, id, name), not
    referenced, so an entry outlives the key, user or object it names.

    ``workspace`` is empty only for a failed sign-in naming no known account (the operator sees
    it in the Django admin); an account's sign-ins and password changes are written once into
    each workspace the account belongs to.
    """

    id = models.CharField(primary_key=True, max_length=32, default=_audit_id, editable=False)
    workspace = models.ForeignKey(
        Workspace, null=True, on_delete=models.CASCADE, related_name="audit_entries"
    )
    created_at = models.DateTimeField(default=timezone.now)
    actor_type = models.CharField(max_length=10)  # user | key | system | anonymous
    actor_id = models.CharField(max_length=64, blank=True)
    actor_name = models.CharField(max_length=254, blank=True)
    action = models.CharField(max_length=64)
    target_type = models.CharField(max_length=32)
    target_id = models.CharField(max_length=64, blank=True)
    target_name = models.CharField(max_length=254, blank=True)
    changes = models.JSONField(default=dict, blank=True)
    ip = models.GenericIPAddressField(null=True, blank=True)

    objects = TenantManager()
    tenancy = Tenancy("workspace")

    class Meta:
        verbose_name = "audit log entry"
        verbose_name_plural = "audit log"
        indexes = [
            # GET /audit: a workspace's entries newest first (by id, which is time-ordered).
            models.Index(fields=["workspace", "-id"], name="audit_ws_list"),
            # The retention sweep: a workspace's entries older than its cut-off.
            models.Index(fields=["workspace", "created_at"], name="audit_ws_age"),
        ]

    def __str__(self) -> str:
        return f"{self.action} by {self.actor_name or self.actor_type} at {self.created_at}"

    def save(self, *args: object, **kwargs: object) -> None:
        if not self._state.adding:
            raise RuntimeError("Audit log entries are append-only.")
        super().save(*args, **kwargs)  # type: ignore[arg-type]


@receiver(post_save, sender=Workspace)
@receiver(post_save, sender=ApiKey)
def _saved(sender: type, instance: Any, update_fields: Any = None, **kwargs: Any) -> None:
    """A key or workspace written: web processes drop what they cached (apikeys.epoch)."""
    epoch.bump_unless_quiet(update_fields)


@receiver(post_delete, sender=Workspace)
@receiver(post_delete, sender=ApiKey)
def _deleted(sender: type, instance: Any, **kwargs: Any) -> None:
    epoch.bump()

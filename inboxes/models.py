"""Domains and inboxes.

Shared domains come from the ``INBOX_DOMAINS`` setting and are not rows; a workspace may own
custom domains (rows here), optionally catch-all.
"""

from __future__ import annotations

from datetime import datetime

from django.conf import settings
from django.db import models
from django.utils import timezone

from config.api.ids import new_id
from config.tenancy import Tenancy, TenantManager


def _dom_id() -> str:
    return new_id("dom")


class Domain(models.Model):
    """A custom domain owned by one workspace."""

    id = models.CharField(primary_key=True, max_length=32, default=_dom_id, editable=False)
    workspace = models.ForeignKey(
        "apikeys.Workspace", on_delete=models.CASCADE, related_name="domains"
    )
    domain = models.CharField(max_length=253, unique=True)
    catch_all = models.BooleanField(
        default=False, help_text="Mail to an unknown local part creates the inbox."
    )
    created_at = models.DateTimeField(auto_now_add=True)

    objects = TenantManager()
    tenancy = Tenancy("workspace")

    class Meta:
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return self.domain


def _inb_id() -> str:
    return new_id("inb")


class Overflow(models.TextChoices):
    DROP_OLDEST = "drop_oldest"
    REJECT = "reject"


class Source(models.TextChoices):
    API = "api"
    DASHBOARD = "dashboard"
    CATCH_ALL = "catch_all"
    AGENT = "agent"


class ForwardSetter(models.TextChoices):
    """Through what ``forward_to`` was last set (empty: before it was recorded)."""

    API_KEY = "api_key"
    SESSION = "session"  # a dashboard member (or the API through a dashboard session)
    OPERATOR = "operator"  # the Django admin


class Inbox(models.Model):
    """A mailbox at ``local_part@domain``. ``expires_at`` null means permanent.

    ``email_count``, ``unread_count`` and ``last_email_at`` are maintained by the mail services
    under the inbox row lock they take anyway to enforce ``max_emails``, so lists never count.
    """

    id = models.CharField(primary_key=True, max_length=32, default=_inb_id, editable=False)
    workspace = models.ForeignKey(
        "apikeys.Workspace", on_delete=models.CASCADE, related_name="inboxes"
    )
    address = models.CharField(max_length=320, unique=True)  # lower-case local@domain
    local_part = models.CharField(max_length=64)
    domain = models.CharField(max_length=253)
    name = models.CharField(max_length=200, blank=True, default="")
    agent_name = models.CharField(max_length=200, blank=True, default="")
    tags = models.JSONField(default=list, blank=True)
    ttl_minutes = models.PositiveIntegerField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    expiry_notified_at = models.DateTimeField(null=True, blank=True, editable=False)
    max_emails = models.PositiveIntegerField(null=True, blank=True)
    overflow = models.CharField(
        max_length=12, choices=Overflow.choices, default=Overflow.DROP_OLDEST
    )
    allow_senders = models.JSONField(default=list, blank=True)
    block_senders = models.JSONField(default=list, blank=True)
    forward_to = models.EmailField(max_length=320, null=True, blank=True)
    # Who set forward_to, and whether they needed approval to send then: a forwarded copy
    # follows their approval rule (outbox.services.forward_approval).
    forward_set_via = models.CharField(
        max_length=10, choices=ForwardSetter.choices, blank=True, default="", editable=False
    )
    forward_set_by_key = models.ForeignKey(
        "apikeys.ApiKey",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        editable=False,
    )
    forward_set_by_user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        editable=False,
    )
    forward_requires_approval = models.BooleanField(default=False, editable=False)
    source = models.CharField(max_length=12, choices=Source.choices, default=Source.API)
    email_count = models.PositiveIntegerField(default=0, editable=False)
    unread_count = models.PositiveIntegerField(default=0, editable=False)
    last_email_at = models.DateTimeField(null=True, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = TenantManager()
    tenancy = Tenancy("workspace")

    class Meta:
        verbose_name_plural = "inboxes"
        indexes = [
            # GET /inboxes: a workspace's inboxes, newest first (expired filtered on expires_at).
            models.Index(fields=["workspace", "-id"], name="inbox_ws_list"),
            # The expiry sweep: disposable inboxes past expiry not yet announced.
            models.Index(
                fields=["expires_at"],
                name="inbox_expiry_due",
                condition=models.Q(expires_at__isnull=False, expiry_notified_at__isnull=True),
            ),
        ]

    def __str__(self) -> str:
        return self.address

    @property
    def permanent(self) -> bool:
        return self.expires_at is None

    def is_expired(self, now: datetime | None = None) -> bool:
        return self.expires_at is not None and self.expires_at <= (now or timezone.now())

    @property
    def status(self) -> str:
        return "expired" if self.is_expired() else "active"

"""Domains and inboxes.

Shared domains come from the ``INBOX_DOMAINS`` setting and are not rows; a workspace may own
custom domains (rows here), optionally catch-all, which receive mail once verified.
"""

from __future__ import annotations

import secrets
from datetime import datetime

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver
from django.utils import timezone

from apikeys import epoch
from config.api.ids import new_id
from config.jsonlists import string_list_errors
from config.tenancy import Tenancy, TenantManager, TenantQuerySet


def _dom_id() -> str:
    return new_id("dom")


def _verification_token() -> str:
    return secrets.token_hex(16)


class CheckResult(models.TextChoices):
    """The outcome of the last TXT lookup of a custom domain."""

    FOUND = "found"  # the record is there with this domain's token
    MISSING = "missing"  # the name has no such record (an answer, not a failure)
    DNS_ERROR = "dns_error"  # no answer (time-out, SERVFAIL): never changes ``verified``
    CONFLICT = "conflict"  # the record is there, but another workspace verified the domain
    REFUSED = "refused"  # a shared domain or a subdomain of one: never a custom domain


def _domains_changed(fields: object = None) -> None:
    epoch.bump()


class DomainQuerySet(TenantQuerySet):
    # Web processes cache each workspace's custom domains under the credentials epoch
    # (inboxes.selectors.domain_list): every write moves it (save and delete: signals below).
    on_update = staticmethod(_domains_changed)


class Domain(models.Model):
    """A custom domain of one workspace; it receives mail only while ``verified``.

    Several workspaces may claim the same name; only one may have it verified, by publishing
    ``_pigeonhole.<domain>`` TXT ``pigeonhole-verification=<token>``. ``verified`` with
    ``verified_at`` null means an operator vouched for it (the Django admin, ``bootstrap
    --verified``, or the upgrade that introduced verification): a missing record does not take
    that away until a lookup has once found it.
    """

    id = models.CharField(primary_key=True, max_length=32, default=_dom_id, editable=False)
    workspace = models.ForeignKey(
        "apikeys.Workspace", on_delete=models.CASCADE, related_name="domains"
    )
    domain = models.CharField(max_length=253)
    catch_all = models.BooleanField(
        default=False, help_text="Mail to an unknown local part creates the inbox."
    )
    verified = models.BooleanField(
        default=False, help_text="Receives mail. Tick only for a domain you know is this one's."
    )
    verification_token = models.CharField(
        max_length=64, default=_verification_token, editable=False
    )
    verified_at = models.DateTimeField(
        null=True, blank=True, editable=False, help_text="When the TXT record was last found."
    )
    last_checked_at = models.DateTimeField(null=True, blank=True, editable=False)
    last_check_result = models.CharField(
        max_length=12, choices=CheckResult.choices, blank=True, default="", editable=False
    )
    last_check_detail = models.CharField(max_length=500, blank=True, default="", editable=False)
    failed_checks = models.PositiveIntegerField(default=0, editable=False)  # missing, in a row
    created_at = models.DateTimeField(auto_now_add=True)

    objects = TenantManager.from_queryset(DomainQuerySet)()
    tenancy = Tenancy("workspace")

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [
            # One claim per workspace and name; led by the name, it also serves every lookup
            # of a name across workspaces (receiving, catch-all, hosted_domain).
            models.UniqueConstraint(
                fields=["domain", "workspace"],
                name="domain_claim_once",
                violation_error_message="This workspace has this domain already.",
            ),
            # A name receives mail for one workspace at most.
            models.UniqueConstraint(
                fields=["domain"],
                condition=models.Q(verified=True),
                name="domain_verified_once",
                violation_error_message="Another workspace has this domain verified.",
            ),
        ]
        indexes = [
            # The periodic re-check: the domains checked longest ago.
            models.Index(fields=["last_checked_at"], name="domain_recheck_due"),
        ]

    def __str__(self) -> str:
        return self.domain

    @property
    def record_name(self) -> str:
        return f"{VERIFICATION_LABEL}.{self.domain}"

    @property
    def record_value(self) -> str:
        return f"{VERIFICATION_PREFIX}{self.verification_token}"


VERIFICATION_LABEL = "_pigeonhole"
VERIFICATION_PREFIX = "pigeonhole-verification="


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
    # No index of its own: inbox_ws_list leads with it and serves every lookup and cascade by it.
    workspace = models.ForeignKey(
        "apikeys.Workspace", on_delete=models.CASCADE, related_name="inboxes", db_index=False
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
    # Faults the SMTP receiver injects for this inbox (mail.smtpd.faults); read with the inbox
    # at RCPT, so they travel in the receiver's cache of admitted inboxes.
    smtp_faults = models.JSONField(default=list, blank=True)
    injected_faults = models.PositiveIntegerField(default=0, editable=False)
    email_count = models.PositiveIntegerField(default=0, editable=False)
    unread_count = models.PositiveIntegerField(default=0, editable=False)
    last_email_at = models.DateTimeField(null=True, blank=True, editable=False)
    # Bytes of its mail as stored: raw messages plus attachments kept apart from them (decoded
    # bytes; an attachment read from its span of the raw message adds nothing). Maintained like
    # email_count, by the receive path and every path that deletes mail, so /stats never scans.
    stored_bytes = models.PositiveBigIntegerField(default=0, editable=False)
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
            # The retention sweep: disposable inboxes by expiry, the longest expired first.
            models.Index(
                fields=["expires_at"],
                name="inbox_purge_due",
                condition=models.Q(expires_at__isnull=False),
            ),
        ]

    def __str__(self) -> str:
        return self.address

    def clean(self) -> None:
        """``tags`` and the sender rules are lists of strings, as the API and the dashboard
        store them (the admin edits them as raw JSON; ``config.jsonlists``)."""
        errors = string_list_errors(self, "tags", "allow_senders", "block_senders")
        if errors:
            raise ValidationError(errors)

    @property
    def permanent(self) -> bool:
        return self.expires_at is None

    def is_expired(self, now: datetime | None = None) -> bool:
        return self.expires_at is not None and self.expires_at <= (now or timezone.now())

    @property
    def status(self) -> str:
        return "expired" if self.is_expired() else "active"


def _smc_id() -> str:
    return new_id("smc")


class SmtpCredential(models.Model):
    """A sandbox SMTP login of one inbox: a client that authenticates with it (AUTH PLAIN or
    LOGIN at the SMTP receiver) may address any recipients, and each message is stored once in
    this inbox with every envelope recipient recorded, never relayed (docs/api.md).

    The password is shown once, when the credential is made; only its SHA-256 digest is stored
    (it is a random ``pgs_`` secret, as API keys are ``pgh_`` ones: ``apikeys.tokens``). The
    username is generated, unique across the instance, and looked up as given (lower case).
    Revoking sets ``revoked_at``: the receiver looks the credential up at every AUTH and again
    in the transaction that stores each message, so nothing of it is cached past revocation.
    """

    id = models.CharField(primary_key=True, max_length=32, default=_smc_id, editable=False)
    workspace = models.ForeignKey("apikeys.Workspace", on_delete=models.CASCADE, related_name="+")
    # No index of its own: the list index below leads with it.
    inbox = models.ForeignKey(
        Inbox, on_delete=models.CASCADE, related_name="smtp_credentials", db_index=False
    )
    name = models.CharField(max_length=200, blank=True, default="")
    # AUTH looks the credential up by this (unique index), then compares the digest in
    # constant time.
    username = models.CharField(max_length=64, unique=True, editable=False)
    digest = models.CharField(max_length=64, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    revoked_at = models.DateTimeField(null=True, blank=True)

    objects = TenantManager()
    tenancy = Tenancy("workspace", parents=("inbox",))

    class Meta:
        verbose_name = "SMTP credential"
        indexes = [
            # GET /inboxes/{id}/smtp-credentials: an inbox's credentials, newest first.
            models.Index(fields=["inbox", "-id"], name="smtpcred_inbox_list"),
        ]

    def __str__(self) -> str:
        return f"{self.username} ({self.inbox_id})"


@receiver(post_save, sender=Domain)
@receiver(post_delete, sender=Domain)
def _domain_written(sender: type, instance: Domain, **kwargs: object) -> None:
    """A custom domain written: web processes drop their cached domain lists (apikeys.epoch)."""
    epoch.bump()

"""Webhook endpoints, their deliveries and every attempt. Deliveries are created from the event
log (``events.Event``) in the transaction that records each event, so none is ever lost.
"""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import models

from config.api.ids import new_id
from config.jsonlists import is_string_list, string_list_errors
from config.tenancy import Tenancy, TenantManager

# The event types an endpoint can subscribe to (the API's choices, the dashboard's and the admin's).
WEBHOOK_EVENTS = (
    "email.received",
    "email.labeled",
    "inbox.created",
    "inbox.expired",
    "inbox.deleted",
    "outbound.pending",
    "outbound.sent",
    "outbound.rejected",
    "outbound.failed",
)


def _whk_id() -> str:
    return new_id("whk")


def _dlv_id() -> str:
    return new_id("dlv")


class Endpoint(models.Model):
    """A webhook endpoint of a workspace. The signing secret is stored encrypted (see
    ``webhooks.secrets``) and shown once, in the create response."""

    id = models.CharField(primary_key=True, max_length=32, default=_whk_id, editable=False)
    workspace = models.ForeignKey(
        "apikeys.Workspace", on_delete=models.CASCADE, related_name="webhook_endpoints"
    )
    url = models.URLField(max_length=2000)
    events = models.JSONField(default=list)
    inbox_ids = models.JSONField(default=list, blank=True)
    label_keys = models.JSONField(default=list, blank=True)
    enabled = models.BooleanField(default=True)
    secret_encrypted = models.TextField(editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = TenantManager()
    tenancy = Tenancy("workspace")

    class Meta:
        indexes = [
            # Fan-out: a workspace's enabled endpoints; GET /webhooks newest first.
            models.Index(fields=["workspace", "-id"], name="endpoint_ws_list"),
        ]

    def __str__(self) -> str:
        return f"{self.url} ({self.id})"

    def clean(self) -> None:
        """``events``, ``inbox_ids`` and ``label_keys`` are JSON lists of strings, ``events`` of
        known types, as the API and the dashboard store them. The admin edits them as raw JSON:
        a string there (``"inbox.created"``) would be read as a subscription by one path and
        not by another (``webhooks.services.fan_out_idle_if`` checks ``events @> [type]`` in
        SQL), so a form that stores anything else is refused."""
        errors = string_list_errors(self, "inbox_ids", "label_keys")
        if not is_string_list(self.events) or not self.events:
            errors["events"] = 'A JSON list of event types, e.g. ["email.received"].'
        elif unknown := sorted(set(self.events) - set(WEBHOOK_EVENTS)):
            errors["events"] = f"Unknown event type(s): {', '.join(unknown)}."
        if errors:
            raise ValidationError(errors)


class DeliveryStatus(models.TextChoices):
    PENDING = "pending"
    SUCCEEDED = "succeeded"
    RETRYING = "retrying"
    FAILED = "failed"


class Delivery(models.Model):
    """One event for one endpoint. The row is the truth: status, how many attempts of the
    current series were made, when the next is due, and who holds it (a lease) right now."""

    id = models.CharField(primary_key=True, max_length=32, default=_dlv_id, editable=False)
    endpoint = models.ForeignKey(Endpoint, on_delete=models.CASCADE, related_name="deliveries")
    workspace_id = models.CharField(max_length=32)
    event_id = models.BigIntegerField(null=True, blank=True)
    event = models.CharField(max_length=40)
    body = models.TextField()  # the JSON payload exactly as signed and sent
    status = models.CharField(
        max_length=10, choices=DeliveryStatus.choices, default=DeliveryStatus.PENDING
    )
    attempt_count = models.PositiveIntegerField(default=0)  # of the current series (replay resets)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    leased_until = models.DateTimeField(null=True, blank=True)
    # Names the attempt that holds the lease: only that attempt may record its outcome, so a
    # worker that outlived its lease cannot overwrite the result of the attempt that took over.
    lease_token = models.CharField(max_length=32, blank=True, default="", editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = TenantManager()
    tenancy = Tenancy("workspace", parents=("endpoint",))

    class Meta:
        verbose_name_plural = "deliveries"
        indexes = [
            # GET /webhooks/{id}/deliveries, newest first.
            models.Index(fields=["endpoint", "-id"], name="delivery_endpoint_list"),
            # The sweeper: deliveries due for an attempt.
            models.Index(
                fields=["next_attempt_at"],
                name="delivery_due",
                condition=models.Q(status__in=["pending", "retrying"]),
            ),
            # /stats: a workspace's deliveries of the last day.
            models.Index(fields=["workspace_id", "created_at"], name="delivery_ws_recent"),
        ]

    def __str__(self) -> str:
        return f"{self.event} → {self.endpoint_id} ({self.status})"


class Attempt(models.Model):
    """One HTTP request of a delivery, as the log shows it."""

    delivery = models.ForeignKey(Delivery, on_delete=models.CASCADE, related_name="attempts")
    at = models.DateTimeField()
    status_code = models.PositiveIntegerField(null=True, blank=True)
    duration_ms = models.PositiveIntegerField(default=0)
    error = models.CharField(max_length=500, blank=True, default="")
    response_excerpt = models.CharField(max_length=1000, blank=True, default="")

    objects = TenantManager()
    tenancy = Tenancy("delivery__workspace", parents=("delivery",))

    class Meta:
        ordering = ["delivery", "id"]

    def __str__(self) -> str:
        return f"{self.delivery_id} {self.status_code or self.error}"

"""Outgoing mail and its approval state machine.

``status`` is the item's state for clients: pending → sent | rejected | expired; sent → failed
when delivery fails for good. ``sent`` means handed to delivery, not delivered: ``delivery`` is
the worker's row-as-truth for handing a sent item to its recipients (internal through the
receive pipeline, external through the email backend), with attempts, their log, the relay's
reply, the next attempt time and a lease. The API shows it as ``delivery.state``.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from config.api.ids import new_id
from config.tenancy import Tenancy, TenantManager


def _out_id() -> str:
    return new_id("out")


class Status(models.TextChoices):
    PENDING = "pending"
    SENT = "sent"
    REJECTED = "rejected"
    FAILED = "failed"
    EXPIRED = "expired"


class DeliveryState(models.TextChoices):
    WAITING = "waiting"  # not to be sent (pending approval, rejected, expired)
    QUEUED = "queued"
    RETRYING = "retrying"
    DONE = "done"  # the relay accepted it (``relay_reply``); shown as ``delivered``
    FAILED = "failed"
    INTERNAL = "internal"  # every recipient is hosted here: delivered through the pipeline
    CAPTURED = "captured"  # kept here, never sent (embedded mode without EMAIL_URL)


# The delivery state as the API names it (``delivery.state``; ``GET /outbox?delivery=``).
DELIVERY_STATE = {
    DeliveryState.WAITING: "not_sent",
    DeliveryState.QUEUED: "queued",
    DeliveryState.RETRYING: "retrying",
    DeliveryState.DONE: "delivered",
    DeliveryState.FAILED: "failed",
    DeliveryState.INTERNAL: "internal",
    DeliveryState.CAPTURED: "captured",
}

DELIVERY_STATE_NAMES = list(DELIVERY_STATE.values())  # the enum of the OpenAPI document


class Kind(models.TextChoices):
    SEND = "send"
    FORWARD = "forward"


class OutboxItem(models.Model):
    id = models.CharField(primary_key=True, max_length=32, default=_out_id, editable=False)
    workspace = models.ForeignKey("apikeys.Workspace", on_delete=models.CASCADE, related_name="+")
    inbox = models.ForeignKey("inboxes.Inbox", on_delete=models.CASCADE, related_name="outbox")
    key = models.ForeignKey(
        "apikeys.ApiKey", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    kind = models.CharField(max_length=10, choices=Kind.choices, default=Kind.SEND)
    from_address = models.CharField(max_length=320)
    from_name = models.CharField(max_length=320, blank=True, default="")
    to = models.JSONField(default=list)
    cc = models.JSONField(default=list)
    subject = models.TextField(blank=True, default="")
    text = models.TextField(blank=True, default="")
    html = models.TextField(blank=True, default="")
    in_reply_to = models.CharField(max_length=32, blank=True, default="")  # an email id
    reason = models.TextField(blank=True, default="")
    status = models.CharField(max_length=10, choices=Status.choices)
    error = models.TextField(blank=True, default="")
    approval_required = models.BooleanField(default=False)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    decision_note = models.TextField(blank=True, default="")
    decided_at = models.DateTimeField(null=True, blank=True)
    message_id = models.CharField(max_length=998, blank=True, default="")
    raw = models.BinaryField(blank=True, default=b"")  # the MIME message as sent
    delivery = models.CharField(
        max_length=10, choices=DeliveryState.choices, default=DeliveryState.WAITING
    )
    attempts = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    leased_until = models.DateTimeField(null=True, blank=True)
    internal_delivered = models.BooleanField(default=False)
    # One entry per attempt: {"at", "reply" (what the relay or pipeline answered) or "error"}.
    attempt_log = models.JSONField(default=list, blank=True)
    relay_reply = models.TextField(blank=True, default="")  # the reply that accepted the message
    delivered_at = models.DateTimeField(null=True, blank=True)
    # Set just before the message itself goes to the relay (SMTP: before DATA), cleared with the
    # attempt's outcome: an attempt that finds it set follows one that stopped while the relay
    # may have been accepting the message.
    handover_at = models.DateTimeField(null=True, blank=True)
    interrupted_handovers = models.PositiveIntegerField(default=0)
    idempotency_key = models.CharField(max_length=255, blank=True, default="")
    request_hash = models.CharField(max_length=64, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    sent_at = models.DateTimeField(null=True, blank=True)

    objects = TenantManager()
    tenancy = Tenancy("workspace", parents=("inbox",))

    class Meta:
        indexes = [
            # GET /outbox?status=, newest first.
            models.Index(fields=["workspace", "status", "-id"], name="outbox_ws_status"),
            models.Index(fields=["workspace", "-id"], name="outbox_ws_list"),
            # Deliveries by state: /stats, the overview, GET /outbox?delivery=.
            models.Index(fields=["workspace", "delivery"], name="outbox_ws_delivery"),
            # The delivery sweeper.
            models.Index(
                fields=["next_attempt_at"],
                name="outbox_delivery_due",
                condition=models.Q(delivery__in=["queued", "retrying"]),
            ),
            # Expiry of pending items.
            models.Index(
                fields=["created_at"], name="outbox_pending", condition=models.Q(status="pending")
            ),
        ]
        constraints = [
            # Idempotency-Key: one item per key and workspace.
            models.UniqueConstraint(
                fields=["workspace", "idempotency_key"],
                condition=~models.Q(idempotency_key=""),
                name="outbox_idempotency_unique",
            )
        ]

    def __str__(self) -> str:
        return f"{self.subject[:60]} ({self.status})"

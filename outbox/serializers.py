"""Request and response shapes of the outbox API."""

from __future__ import annotations

from rest_framework import serializers

from config.api.inputs import JsonIn, single_line
from config.api.query import PageQuery
from mail.serializers import AddressOut
from outbox.models import DELIVERY_STATE_NAMES, Status


class SendIn(JsonIn):
    to = serializers.ListField(
        child=serializers.EmailField(max_length=320), min_length=1, max_length=50
    )
    cc = serializers.ListField(
        child=serializers.EmailField(max_length=320), max_length=50, default=list
    )
    subject = serializers.CharField(max_length=998, allow_blank=True, validators=[single_line])
    text = serializers.CharField(max_length=1_000_000, allow_blank=True, trim_whitespace=False)
    html = serializers.CharField(
        max_length=2_000_000, allow_blank=True, default="", trim_whitespace=False
    )
    in_reply_to = serializers.CharField(
        max_length=32,
        required=False,
        allow_blank=True,
        help_text="Id of the email replied to (sets In-Reply-To and References).",
    )
    reason = serializers.CharField(
        max_length=2000, allow_blank=True, default="", help_text="Shown to the approver."
    )


class WaitQuery(serializers.Serializer):
    wait = serializers.IntegerField(
        min_value=0,
        max_value=120,
        default=0,
        help_text="Seconds to wait for a pending item's decision. A waiting request counts "
        "with the key's open waits and streams against MAX_OPEN_STREAMS_PER_KEY (429 "
        "rate_limited beyond it, before anything is sent).",
    )


DELIVERY_STATES = DELIVERY_STATE_NAMES


class OutboxListQuery(PageQuery):
    default_limit = 50
    max_limit = 200
    status = serializers.ChoiceField(choices=Status.choices, required=False)
    delivery = serializers.ChoiceField(
        choices=DELIVERY_STATES, required=False, help_text="Only items in this delivery state."
    )


class DecisionIn(JsonIn):
    decision = serializers.ChoiceField(choices=["approve", "reject"])
    note = serializers.CharField(max_length=2000, allow_blank=True, default="")
    subject = serializers.CharField(
        max_length=998, allow_blank=True, required=False, validators=[single_line]
    )
    text = serializers.CharField(
        max_length=1_000_000,
        allow_blank=True,
        required=False,
        trim_whitespace=False,
        help_text="The edited text. If the item has an HTML part, an edited text replaces it "
        "with the text rendered as HTML (escaped; paragraphs at blank lines, <br> at line "
        "breaks), so the recipients get what was approved. A forwarded copy takes no edits.",
    )


class OutboxDeliveryAttemptOut(serializers.Serializer):
    at = serializers.DateTimeField()
    reply = serializers.CharField(
        allow_null=True, help_text="What the relay (or this service's pipeline) answered."
    )
    error = serializers.CharField(allow_null=True, help_text="Why the attempt failed.")


class OutboxDeliveryOut(serializers.Serializer):
    state = serializers.ChoiceField(
        choices=DELIVERY_STATES,
        help_text="not_sent: pending approval, rejected or expired; queued: waiting for its "
        "first attempt; retrying: the relay refused the connection or answered 4xx, the next "
        "attempt is at next_attempt_at; delivered: the relay accepted it (reply); failed: a 5xx "
        "or the retries ran out (status failed); internal: every recipient is hosted here and "
        "got it through the receive pipeline; captured: kept here and never sent (embedded mode "
        "without EMAIL_URL).",
    )
    attempts = OutboxDeliveryAttemptOut(many=True)
    next_attempt_at = serializers.DateTimeField(allow_null=True)
    reply = serializers.CharField(
        allow_null=True, help_text="The reply that accepted the message (e.g. 250 …)."
    )
    delivered_at = serializers.DateTimeField(allow_null=True)


class OutboxOut(serializers.Serializer):
    id = serializers.CharField()
    inbox_id = serializers.CharField()
    to = serializers.ListField(child=serializers.CharField())
    cc = serializers.ListField(child=serializers.CharField())
    subject = serializers.CharField()
    text = serializers.CharField()
    html = serializers.CharField()
    in_reply_to = serializers.CharField(allow_null=True)
    reason = serializers.CharField()
    status = serializers.ChoiceField(choices=Status.choices)
    error = serializers.CharField()
    approval_required = serializers.BooleanField()
    decided_by = serializers.CharField(allow_null=True)
    decision_note = serializers.CharField()
    decided_at = serializers.DateTimeField(allow_null=True)
    message_id = serializers.CharField()
    created_at = serializers.DateTimeField()
    sent_at = serializers.DateTimeField(allow_null=True)
    delivery = OutboxDeliveryOut(
        help_text="Where the message is on its way. status sent means handed to delivery; "
        "this says whether it was delivered."
    )

    def get_fields(self) -> dict[str, serializers.Field]:
        fields = super().get_fields()
        fields["from"] = AddressOut()
        return fields


class _InboxCountsOut(serializers.Serializer):
    total = serializers.IntegerField()
    active = serializers.IntegerField()
    expired = serializers.IntegerField()


class _EmailCountsOut(serializers.Serializer):
    total = serializers.IntegerField()
    last_24h = serializers.IntegerField()
    unread = serializers.IntegerField()


class _OutboxCountsOut(serializers.Serializer):
    pending = serializers.IntegerField()
    sent = serializers.IntegerField()
    rejected = serializers.IntegerField()
    failed = serializers.IntegerField()
    expired = serializers.IntegerField()


class _OutboxDeliveryCountsOut(serializers.Serializer):
    queued = serializers.IntegerField(help_text="Handed to delivery, first attempt not made.")
    retrying = serializers.IntegerField(help_text="The relay refused or deferred; will retry.")
    delivered = serializers.IntegerField(help_text="The relay accepted the message.")
    internal = serializers.IntegerField(help_text="Delivered to inboxes of this service.")
    captured = serializers.IntegerField(help_text="Kept here, never sent (no EMAIL_URL).")
    failed = serializers.IntegerField(help_text="Failed for good.")


class _DeliveryCountsOut(serializers.Serializer):
    deliveries_24h = serializers.IntegerField()
    failed_24h = serializers.IntegerField()


class _LargeInboxOut(serializers.Serializer):
    id = serializers.CharField()
    address = serializers.CharField()
    bytes = serializers.IntegerField(help_text="Bytes of its mail as stored.")
    email_count = serializers.IntegerField()


class _StorageOut(serializers.Serializer):
    bytes = serializers.IntegerField(
        help_text="Bytes of the workspace's mail as stored: raw messages plus attachments kept "
        "apart from them, before the database's own compression. A maintained counter."
    )
    largest_inboxes = _LargeInboxOut(
        many=True, help_text="The inboxes that store the most bytes, largest first (at most 5)."
    )


class RecentEventOut(serializers.Serializer):
    id = serializers.IntegerField()
    type = serializers.CharField()
    inbox_id = serializers.CharField(allow_null=True)
    created_at = serializers.DateTimeField()
    data = serializers.DictField()


class StatsOut(serializers.Serializer):
    inboxes = _InboxCountsOut()
    emails = _EmailCountsOut()
    outbox = _OutboxCountsOut()
    outbox_delivery = _OutboxDeliveryCountsOut(
        help_text="Sent outbox items by delivery state: what was delivered, not handed over."
    )
    webhooks = _DeliveryCountsOut()
    storage = _StorageOut()
    recent_events = RecentEventOut(many=True)

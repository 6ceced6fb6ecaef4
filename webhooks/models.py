"""The event log (every event, once, written in the transaction of the change it describes).

Webhook endpoints and deliveries join this module with the webhooks issue; the stream, webhooks
and /stats all read the log.
"""

from __future__ import annotations

from django.db import models


class Event(models.Model):
    """One thing that happened, as a plain dict (never a model reference): the log is the truth."""

    # A database sequence: stream clients resume after the last ``id`` they saw.
    id = models.BigAutoField(primary_key=True)
    workspace_id = models.CharField(max_length=32)
    inbox_id = models.CharField(max_length=32, blank=True, default="")
    type = models.CharField(max_length=40)
    # The previous event of the same inbox (see webhooks.events): listeners detect gaps with it.
    prev_id = models.BigIntegerField(null=True, blank=True)
    data = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        indexes = [
            # Stream replay: an inbox's events after a given id.
            models.Index(fields=["inbox_id", "id"], name="event_inbox_seq"),
            # /stats recent events of a workspace.
            models.Index(fields=["workspace_id", "-id"], name="event_ws_recent"),
        ]

    def __str__(self) -> str:
        return f"{self.type} #{self.pk}"

"""The event log: every event, once, written in the transaction of the change it describes. The
stream, the wake-up hub's sweep, webhook fan-out and /stats read it; nothing but ``emit()``
writes it.
"""

from __future__ import annotations

from django.db import models

from config.tenancy import Tenancy, TenantManager


class Event(models.Model):
    """One thing that happened, as a plain dict (never a model reference): the log is the truth."""

    # A database sequence: stream clients resume after the last ``id`` they saw.
    id = models.BigAutoField(primary_key=True)
    workspace_id = models.CharField(max_length=32)
    inbox_id = models.CharField(max_length=32, blank=True, default="")
    type = models.CharField(max_length=40)
    # The previous event of the same inbox (see events.services): listeners detect gaps with it.
    prev_id = models.BigIntegerField(null=True, blank=True)
    data = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    objects = TenantManager()
    tenancy = Tenancy("workspace")

    class Meta:
        # The table the log was created as when it lived in the webhooks app: the move between
        # apps changed Django's state only (events 0001, webhooks 0004), never the data.
        db_table = "webhooks_event"
        indexes = [
            # Stream replay: an inbox's events after a given id.
            models.Index(fields=["inbox_id", "id"], name="event_inbox_seq"),
            # /stats recent events of a workspace.
            models.Index(fields=["workspace_id", "-id"], name="event_ws_recent"),
        ]

    def __str__(self) -> str:
        return f"{self.type} #{self.pk}"

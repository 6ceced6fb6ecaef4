"""Domains and inboxes.

Shared domains come from the ``INBOX_DOMAINS`` setting and are not rows; a workspace may own
custom domains (rows here), optionally catch-all.
"""

from __future__ import annotations

from django.db import models

from config.api.ids import new_id


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

    class Meta:
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return self.domain

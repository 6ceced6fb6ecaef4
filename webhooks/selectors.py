"""Reads of webhook endpoints and deliveries, scoped to a workspace."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Count, OuterRef, Prefetch, Q, QuerySet, Subquery
from django.utils import timezone

from apikeys.models import Workspace
from config.api.errors import ValidationFailed
from inboxes.addresses import canonical_address
from inboxes.models import Inbox
from labels.models import Label
from webhooks.exceptions import DeliveryNotFound, EndpointNotFound, UnknownLabelKey
from webhooks.models import Attempt, Delivery, Endpoint


def endpoint_list(workspace: Workspace) -> QuerySet[Endpoint]:
    return Endpoint.objects.filter(workspace=workspace)


def endpoint_get(workspace: Workspace, endpoint_id: str) -> Endpoint:
    endpoint = Endpoint.objects.filter(workspace=workspace, pk=endpoint_id).first()
    if endpoint is None:
        raise EndpointNotFound()
    return endpoint


def delivery_list(endpoint: Endpoint) -> QuerySet[Delivery]:
    return Delivery.objects.filter(endpoint=endpoint).prefetch_related(
        Prefetch("attempts", queryset=Attempt.objects.order_by("id"))
    )


def delivery_get(endpoint: Endpoint, delivery_id: str) -> Delivery:
    delivery = delivery_list(endpoint).filter(pk=delivery_id).first()
    if delivery is None:
        raise DeliveryNotFound()
    return delivery


def inbox_ids_resolve(workspace: Workspace, refs: list[str]) -> list[str]:
    """Inbox ids for ids or addresses of the workspace's inboxes; another workspace's inbox is
    a validation error."""
    resolved, issues = [], []
    for index, ref in enumerate(refs):
        # An address resolves as a recipient does (plus tag removed): inboxes.addresses.
        lookup = {"address": canonical_address(ref)} if "@" in ref else {"pk": ref}
        found = Inbox.objects.filter(workspace=workspace, **lookup).values_list("pk", flat=True)
        inbox_id = found.first()
        if inbox_id is None:
            issues.append({"path": f"inbox_ids.{index}", "message": f"No inbox '{ref}'."})
        else:
            resolved.append(inbox_id)
    if issues:
        raise ValidationFailed(issues[0]["message"], issues=issues)
    return list(dict.fromkeys(resolved))


def label_keys_check(workspace: Workspace, keys: list[str]) -> list[str]:
    known = set(
        Label.objects.filter(workspace=workspace, key__in=keys).values_list("key", flat=True)
    )
    missing = [key for key in keys if key not in known]
    if missing:
        raise UnknownLabelKey(
            f"Unknown label key(s): {', '.join(missing)}.",
            issues=[
                {"path": "label_keys", "message": f"Unknown label '{key}'."} for key in missing
            ],
        )
    return list(dict.fromkeys(keys))


def endpoint_filters_check(workspace: Workspace, data: dict[str, Any]) -> dict[str, Any]:
    """An endpoint's fields with its filters checked against the workspace, as the API and the
    dashboard both take them: ``inbox_ids`` as ids (given as ids or addresses of its inboxes),
    ``label_keys`` as keys of its labels; anything else is a validation error."""
    if "inbox_ids" in data:
        data["inbox_ids"] = inbox_ids_resolve(workspace, data["inbox_ids"])
    if "label_keys" in data:
        data["label_keys"] = label_keys_check(workspace, data["label_keys"])
    return data


def endpoint_list_with_last_delivery(workspace: Workspace) -> QuerySet[Endpoint]:
    """The workspace's endpoints, newest first, each with ``last_status`` and ``last_at`` of
    its newest delivery and ``last_code``, the status code of that delivery's latest attempt."""
    newest = Delivery.objects.filter(endpoint=OuterRef("pk")).order_by("-id")
    latest_attempt = Attempt.objects.filter(
        delivery=OuterRef("pk"), status_code__isnull=False
    ).order_by("-id")
    newest_code = newest.annotate(code=Subquery(latest_attempt.values("status_code")[:1])).values(
        "code"
    )[:1]
    return (
        Endpoint.objects.filter(workspace=workspace)
        .annotate(
            last_status=Subquery(newest.values("status")[:1]),
            last_at=Subquery(newest.values("created_at")[:1]),
            last_code=Subquery(newest_code),
        )
        .order_by("-id")
    )


def recent_deliveries(endpoint: Endpoint, limit: int = 50) -> list[Delivery]:
    """The endpoint's newest deliveries with their attempts (oldest attempt first)."""
    return list(delivery_list(endpoint).order_by("-id")[:limit])


def inbox_choices(workspace: Workspace) -> list[tuple[str, str]]:
    """``(id, address)`` of the workspace's inboxes, for the endpoint filter."""
    return list(
        Inbox.objects.filter(workspace=workspace).order_by("address").values_list("pk", "address")
    )


def label_key_choices(workspace: Workspace) -> list[tuple[str, str]]:
    """``(key, name)`` of the workspace's labels, for the endpoint filter."""
    return list(
        Label.objects.filter(workspace=workspace).order_by("key").values_list("key", "name")
    )


DELIVERY_STATUSES = ("succeeded", "failed", "retrying", "pending")


def delivery_counts_since(workspace: Workspace, since: datetime) -> dict[str, int]:
    """Deliveries created since ``since`` and how many of them failed (the
    ``(workspace_id, created_at)`` index)."""
    return Delivery.objects.filter(workspace_id=workspace.pk, created_at__gte=since).aggregate(
        deliveries_24h=Count("pk"), failed_24h=Count("pk", filter=Q(status="failed"))
    )


@dataclass(frozen=True)
class WebhookHealth:
    """Deliveries created in the window, by status, and the share that succeeded of those
    attempted so far (``pending`` ones have not been tried yet; ``retrying`` ones have failed at
    least once); ``rate`` is None when nothing was attempted."""

    by_status: dict[str, int]
    total: int
    attempted: int
    rate: float | None


def webhook_health(
    workspace: Workspace, hours: int = 24, now: datetime | None = None
) -> WebhookHealth:
    """Webhook deliveries of the last ``hours`` by status, with the success rate."""
    since = (now or timezone.now()) - timedelta(hours=hours)
    by_status = dict.fromkeys(DELIVERY_STATUSES, 0)
    for status, count in (
        Delivery.objects.filter(workspace_id=workspace.pk, created_at__gte=since)
        .values_list("status")
        .annotate(n=Count("*"))
        .order_by()
    ):
        by_status[status] = count
    total = sum(by_status.values())
    attempted = total - by_status["pending"]
    rate = by_status["succeeded"] / attempted if attempted else None
    return WebhookHealth(by_status=by_status, total=total, attempted=attempted, rate=rate)

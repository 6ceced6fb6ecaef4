"""Reads of webhook endpoints and deliveries, scoped to a workspace."""

from __future__ import annotations

from django.apps import apps
from django.db.models import Prefetch, QuerySet

from apikeys.models import Workspace
from config.api.errors import ValidationFailed
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
    """Inbox ids for ids or addresses of the workspace's inboxes (inboxes by string reference:
    webhooks import no domain app); another workspace's inbox is a validation error."""
    Inbox = apps.get_model("inboxes", "Inbox")
    resolved, issues = [], []
    for index, ref in enumerate(refs):
        lookup = {"address": ref.lower()} if "@" in ref else {"pk": ref}
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
    Label = apps.get_model("labels", "Label")
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

"""Writes of the event hub's webhook side: endpoints, the fan-out of events into deliveries, the
attempt of a delivery (claim, send, log, schedule), the sweeper, replay and test.

Deliveries are created in the transaction that records their event, so a committed event always
has its deliveries. An attempt first takes a lease on the row with a conditional UPDATE; only the
worker whose UPDATE matched sends, so no delivery is ever sent twice at the same time, and a lease
that expires (a worker killed mid-attempt) lets the sweeper hand the delivery to another worker.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from apikeys import audit
from apikeys.audit import Actor, Target
from apikeys.models import Workspace
from config.api.timestamps import iso
from config.changes import save_changes
from config.rows import placeholders, select_rows
from config.work import WorkQueue
from events.models import Event
from webhooks import secrets, sender
from webhooks.exceptions import EndpointNotFound
from webhooks.models import WEBHOOK_EVENTS, Attempt, Delivery, DeliveryStatus, Endpoint

logger = logging.getLogger(__name__)

TEST_EVENT = "webhook.test"
IN_PROGRESS = "in progress"
INTERRUPTED = "interrupted: the worker stopped before the answer was recorded"
LEASE_LOST = "not sent: the worker stalled until its lease ran out"
LEASE_MARGIN = 3.0  # seconds of the lease kept for recording the outcome after the request

# Deliveries to attempt: the lease, retry and sweep engine of config.work, with this queue's
# settings. The lease is longer than any request can take (the request gets at most what is left
# of it, less LEASE_MARGIN); embedded mode leaves every attempt to the in-process sweeper, so an
# HTTP call never runs inside the request or SMTP transaction that caused it.
DELIVERIES = WorkQueue(
    model=Delivery,
    state_field="status",
    due_states=(DeliveryStatus.PENDING, DeliveryStatus.RETRYING),
    task="webhooks.deliver",
    retry_schedule="WEBHOOK_RETRY_SCHEDULE",
    lease_seconds=lambda: settings.WEBHOOK_TIMEOUT + 5,
    sweep_grace="WEBHOOK_SWEEP_GRACE",
    runs_inline=False,
    token_field="lease_token",
)


# --- endpoints ----------------------------------------------------------------------------------


def endpoint_create(
    *,
    workspace: Workspace,
    url: str,
    events: list[str],
    inbox_ids: list[str],
    label_keys: list[str],
    enabled: bool = True,
    by: Actor,
) -> tuple[Endpoint, str]:
    """A new endpoint and its plain signing secret (returned once, stored encrypted)."""
    secret = secrets.generate()
    with transaction.atomic():
        endpoint = Endpoint.objects.create(
            workspace=workspace,
            url=url,
            events=events,
            inbox_ids=inbox_ids,
            label_keys=label_keys,
            enabled=enabled,
            secret_encrypted=secrets.encrypt(secret),
        )
        audit.record(
            workspace=workspace,
            by=by,
            action="webhook.created",
            target=_target(endpoint),
            changes=audit.created(
                endpoint, ["url", "events", "inbox_ids", "label_keys", "enabled"]
            ),
        )
    return endpoint, secret


def _target(endpoint: Endpoint) -> Target:
    return Target("webhook", endpoint.pk, audit.url_origin(endpoint.url))


def endpoint_update(*, endpoint: Endpoint, by: Actor, **fields: Any) -> Endpoint:
    """Changes the given fields (never the signing secret)."""
    changed = [name for name, value in fields.items() if getattr(endpoint, name) != value]
    before = {name: getattr(endpoint, name) for name in changed}
    for name in changed:
        setattr(endpoint, name, fields[name])
    if changed:
        with transaction.atomic():
            save_changes(endpoint, [*changed, "updated_at"], gone=EndpointNotFound())
            audit.record(
                workspace=endpoint.workspace_id,
                by=by,
                action="webhook.updated",
                target=_target(endpoint),
                changes=audit.diff(before, {name: fields[name] for name in changed}),
            )
    return endpoint


def endpoint_delete(*, endpoint: Endpoint, by: Actor) -> None:
    """Deletes the endpoint with its deliveries and their log."""
    with transaction.atomic():
        audit.record(
            workspace=endpoint.workspace_id,
            by=by,
            action="webhook.deleted",
            target=_target(endpoint),
        )
        endpoint.delete()


# --- fan-out --------------------------------------------------------------------------------------


def _body(delivery_id: str, event_type: str, created_at: Any, data: dict) -> str:
    payload = {"id": delivery_id, "type": event_type, "created_at": iso(created_at), "data": data}
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False)


def _label_keys_of(event: Event) -> set[str]:
    if event.type == "email.labeled":
        labels = event.data.get("labels") or []
    else:
        labels = (event.data.get("email") or {}).get("labels") or []
    return {label.get("key") for label in labels}


def _wants(endpoint: Endpoint, event: Event) -> bool:
    """Whether ``endpoint`` gets ``event``. Its three lists are read as lists only: an endpoint
    with any of them stored as something else (raw JSON edited in the admin before
    ``Endpoint.clean`` refused it) gets nothing, as ``fan_out_idle_if``'s ``events @> [type]``
    reads a string, and never every event, as a substring test or a falsy filter would."""
    events, inbox_ids, label_keys = endpoint.events, endpoint.inbox_ids, endpoint.label_keys
    if not (isinstance(events, list) and isinstance(inbox_ids, list)):
        return False
    if not isinstance(label_keys, list) or event.type not in events:
        return False
    if inbox_ids and event.inbox_id not in inbox_ids:
        return False
    return not (
        label_keys
        and event.type.startswith("email.")
        and not (_label_keys_of(event) & set(label_keys))
    )


def _delivery(endpoint: Endpoint, event_type: str, data: dict, event_id: int | None) -> Delivery:
    """An unsaved delivery with its body as it will be signed and sent."""
    delivery = Delivery(
        endpoint=endpoint,
        workspace_id=endpoint.workspace_id,
        event_id=event_id,
        event=event_type,
        next_attempt_at=timezone.now(),
    )
    delivery.body = _body(delivery.pk, event_type, timezone.now(), data)
    return delivery


def _save_and_queue(deliveries: list[Delivery]) -> list[Delivery]:
    """Stores the deliveries and hands them to workers once the transaction commits."""
    if deliveries:
        Delivery.objects.bulk_create(deliveries)
        ids = [delivery.pk for delivery in deliveries]
        transaction.on_commit(lambda: [DELIVERIES.queue(delivery_id) for delivery_id in ids])
    return deliveries


def fan_out_idle_if(workspace_id: str, inbox_id: str, type: str) -> bool | tuple[str, list[Any]]:
    """When ``fan_out`` has nothing to do for an event (``events.on_record``'s ``idle_if``):
    never for a type no webhook carries; otherwise when no enabled endpoint of the workspace
    subscribes to the type (``_wants`` checks the type first, so there is then no delivery)."""
    if type not in WEBHOOK_EVENTS:
        return True
    table = Endpoint._meta.db_table
    return (
        f'NOT EXISTS (SELECT 1 FROM "{table}" WHERE "workspace_id" = %s AND "enabled" '
        'AND "events" @> jsonb_build_array(%s::text))',
        [workspace_id, type],
    )


def fan_out(records: Sequence[Event]) -> list[Delivery]:
    """Deliveries for every enabled endpoint that wants each event (in the events' transaction;
    one read of the endpoints and one insert for the whole batch): the ``events.on_record``
    hook registered by ``WebhooksConfig.ready``."""
    wanted = [event for event in records if event.type in WEBHOOK_EVENTS]
    if not wanted:
        return []
    endpoints: dict[str, list[Endpoint]] = {}
    owners = sorted({event.workspace_id for event in wanted})
    where = f"workspace_id IN ({placeholders(len(owners))}) AND enabled = %s ORDER BY id"
    for endpoint in select_rows(Endpoint, where, [*owners, True]):  # per batch: config.rows
        endpoints.setdefault(endpoint.workspace_id, []).append(endpoint)
    return _save_and_queue(
        [
            _delivery(endpoint, event.type, event.data, event.pk)
            for event in wanted
            for endpoint in endpoints.get(event.workspace_id, ())
            if _wants(endpoint, event)
        ]
    )


# --- attempts ---------------------------------------------------------------------------------


def signed_request(delivery: Delivery, at: datetime) -> tuple[bytes, dict[str, str]]:
    """The body (its exact bytes) and headers of an attempt of ``delivery`` made at ``at``,
    signed with the endpoint's secret over ``<t>.<body>`` where ``t`` is ``at`` in Unix seconds.
    The one place that signs: attempts and replays go through here."""
    body = delivery.body.encode()
    secret = secrets.decrypt(delivery.endpoint.secret_encrypted)
    return body, {
        "Service-Event": delivery.event,
        "Service-Delivery": delivery.pk,
        "Service-Signature": secrets.sign(secret, int(at.timestamp()), body),
    }


def attempt(delivery_id: str, *, now: datetime | None = None) -> Attempt | None:
    """One attempt of a due delivery, if this worker wins the lease; None otherwise.

    ``now`` is the clock (default: the real one): whether the delivery is due, the attempt's
    time and the next attempt's are reckoned from it; the request itself runs in real time.
    The attempt is logged before the request goes out and completed after, so a worker killed
    mid-request leaves an ``interrupted`` entry and every request a receiver saw is in the log.
    The request gets what is left of the lease (at most ``WEBHOOK_TIMEOUT``), and only the
    holder of the lease records the outcome on the row.
    """
    now = now or timezone.now()
    claimed_at = time.monotonic()
    token = DELIVERIES.claim(delivery_id, now)
    if token is None:
        return None
    delivery = Delivery.objects.unscoped().select_related("endpoint").filter(pk=delivery_id).first()
    if delivery is None:  # deleted with its endpoint since the claim
        return None
    held = Delivery.objects.filter(
        workspace_id=delivery.workspace_id, pk=delivery.pk, lease_token=token
    )
    Attempt.objects.filter(delivery=delivery, error=IN_PROGRESS).update(error=INTERRUPTED)
    started = now + timedelta(seconds=time.monotonic() - claimed_at)
    try:
        logged = Attempt.objects.create(delivery=delivery, at=started, error=IN_PROGRESS)
    except IntegrityError:  # the same, a moment later
        return None
    body, headers = signed_request(delivery, started)
    left = DELIVERIES.lease().total_seconds() - LEASE_MARGIN - (time.monotonic() - claimed_at)
    if left <= 0:  # this worker stalled: let another take the delivery, send nothing
        logged.error = LEASE_LOST
        logged.save(update_fields=["error"])
        held.update(**DELIVERIES.released())
        return logged
    outcome = sender.post(
        delivery.endpoint.url, body, headers, deadline=min(settings.WEBHOOK_TIMEOUT, left)
    )
    finished = started + timedelta(milliseconds=outcome.duration_ms)
    with transaction.atomic():
        result = {
            "status_code": outcome.status_code,
            "duration_ms": outcome.duration_ms,
            "error": outcome.error[:500],
            "response_excerpt": outcome.excerpt[:1000],
        }
        # An update, not save(): the endpoint (and this log) may have been deleted meanwhile.
        Attempt.objects.filter(delivery=delivery, pk=logged.pk).update(**result)
        for name, value in result.items():
            setattr(logged, name, value)
        next_at = None
        if outcome.succeeded:
            status = DeliveryStatus.SUCCEEDED
        elif next_at := DELIVERIES.next_attempt(delivery.attempt_count + 1, finished):
            status = DeliveryStatus.RETRYING
        else:
            status = DeliveryStatus.FAILED
        recorded = held.update(
            status=status,
            attempt_count=F("attempt_count") + 1,
            next_attempt_at=next_at,
            updated_at=timezone.now(),
            **DELIVERIES.released(),
        )
    if not recorded:  # deleted meanwhile, or (never while attempts end before their lease) stale
        logger.warning(
            "attempt of %s: delivery deleted or lease lost; outcome not recorded", delivery.pk
        )
        return logged
    if next_at is not None:
        DELIVERIES.queue(delivery.pk, countdown=max(0.0, (next_at - finished).total_seconds()))
    return logged


def sweep() -> int:
    """Hands due deliveries to workers when the broker lost their task (``config.work``);
    embedded mode attempts every due delivery right here."""
    return DELIVERIES.sweep(attempt)


def replay(*, delivery: Delivery) -> Delivery:
    """Sends the same delivery again (same id and body; new timestamp and signature) as a new
    series of attempts."""
    Delivery.objects.filter(workspace_id=delivery.workspace_id, pk=delivery.pk).update(
        status=DeliveryStatus.PENDING,
        attempt_count=0,
        next_attempt_at=timezone.now(),
        leased_until=None,
        updated_at=timezone.now(),
    )
    DELIVERIES.queue(delivery.pk)
    delivery.refresh_from_db()
    return delivery


def send_test(*, endpoint: Endpoint) -> Delivery:
    """A ``webhook.test`` delivery to this endpoint, logged like any other."""
    with transaction.atomic():
        delivery = _delivery(
            endpoint,
            TEST_EVENT,
            {
                "endpoint": {"id": endpoint.pk, "url": endpoint.url},
                "message": "This is a test event from Pigeonhole.",
            },
            None,
        )
        return _save_and_queue([delivery])[0]


def workspace_deliveries_purge(workspace_id: str) -> int:
    """The deliveries (and their attempts) of a workspace that is being deleted, a chunk per
    transaction (the ``apikeys.services.on_workspace_delete`` hook: one delivery per event and
    endpoint adds up, and the cascade would load every one of them to find its attempts)."""
    deleted = 0
    while ids := list(
        Delivery.objects.filter(workspace_id=workspace_id).values_list("pk", flat=True)[
            : settings.RETENTION_CHUNK
        ]
    ):
        with transaction.atomic():
            Attempt.objects.filter(
                delivery__workspace_id=workspace_id, delivery_id__in=ids
            ).delete()
            Delivery.objects.filter(workspace_id=workspace_id, pk__in=ids).delete()
        deleted += len(ids)
    return deleted

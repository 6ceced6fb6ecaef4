"""Writes of the outbox: send (with Idempotency-Key), decisions, delivery attempts, expiry,
forwarding. Every status transition emits its ``outbound.*`` event once, which also wakes
waiters on ``GET /outbox/{id}?wait=``."""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from apikeys import audit
from apikeys.audit import Actor, Target
from apikeys.models import ApiKey, Membership, role_may
from apikeys.principal import Principal
from config.api.errors import Forbidden, ValidationFailed
from config.api.timestamps import iso
from config.work import WorkQueue
from events import services as events
from events.models import Event
from inboxes.models import ForwardSetter, Inbox
from mail.exceptions import EmailNotFound
from mail.models import Email, RawMessage
from mail.selectors import email_get
from outbox import delivery as transport
from outbox import mime
from outbox.exceptions import InvalidState
from outbox.models import DeliveryState, Kind, OutboxItem, Status
from outbox.parts import text_as_html
from outbox.selectors import delivery_record

logger = logging.getLogger(__name__)

# Sent items to hand to the relay: the lease, retry and sweep engine of config.work, with this
# queue's settings. Embedded mode attempts at once (the send's answer may already say where the
# message went); retries wait for the in-process sweeper.
DELIVERIES = WorkQueue(
    model=OutboxItem,
    state_field="delivery",
    due_states=(DeliveryState.QUEUED, DeliveryState.RETRYING),
    task="outbox.deliver",
    retry_schedule="OUTBOX_RETRY_SCHEDULE",
    lease_seconds=lambda: settings.OUTBOX_LEASE_SECONDS,
    sweep_grace="OUTBOX_SWEEP_GRACE",
    runs_inline=True,
)

OUTBOUND_PENDING = "outbound.pending"
OUTBOUND_SENT = "outbound.sent"
OUTBOUND_REJECTED = "outbound.rejected"
OUTBOUND_FAILED = "outbound.failed"
OUTBOUND_EXPIRED = "outbound.expired"  # not a webhook type; it wakes waiters
IDEMPOTENCY_WINDOW = timedelta(hours=24)
MAX_ATTEMPT_LOG = 20
CAPTURED_REPLY = (
    "captured here, not sent: embedded mode without EMAIL_URL keeps mail for other domains"
)
INTERRUPTED_HANDOVER = (
    "an earlier attempt stopped while the relay may have been accepting the message; "
    "it was sent again and may arrive twice"
)


def outbound_record(item: OutboxItem) -> dict[str, Any]:
    """The item as the API and the ``outbound.*`` events show it."""
    return {
        "id": item.pk,
        "inbox_id": item.inbox_id,
        "from": {"address": item.from_address, "name": item.from_name},
        "to": item.to,
        "cc": item.cc,
        "subject": item.subject,
        "text": item.text,
        "html": item.html,
        "in_reply_to": item.in_reply_to or None,
        "reason": item.reason,
        "status": item.status,
        "error": item.error,
        "approval_required": item.approval_required,
        "decided_by": (item.decided_by.get_username() if item.decided_by_id else None),
        "decision_note": item.decision_note,
        "decided_at": iso(item.decided_at),
        "message_id": item.message_id,
        "created_at": iso(item.created_at),
        "sent_at": iso(item.sent_at),
        "delivery": delivery_record(item),
    }


def outbox_group(item_id: str) -> str:
    """The channel-layer group of the waiters on one outbox item (``outbox.realtime``)."""
    return f"outbox.{item_id}"


def _emit(item: OutboxItem, event_type: str) -> None:
    events.emit(
        workspace_id=item.workspace_id,
        inbox_id=item.inbox_id,  # webhook inbox filters and the inbox's event chain
        type=event_type,
        data={
            "outbound": outbound_record(item),
            "inbox": {"id": item.inbox_id, "address": item.inbox.address},
        },
        wake=[outbox_group(item.pk)],  # and the waiters on the item (``?wait=``)
    )


def request_hash(body: dict[str, Any], inbox_id: str) -> str:
    return hashlib.sha256(
        json.dumps({"inbox": inbox_id, "body": body}, sort_keys=True, default=str).encode()
    ).hexdigest()


def _build(item: OutboxItem, references: list[str]) -> bytes:
    return mime.build(
        from_address=item.from_address,
        from_name=item.from_name,
        to=item.to,
        cc=item.cc,
        subject=item.subject,
        text=item.text,
        html=item.html,
        message_id=item.message_id,
        in_reply_to=references[-1] if references else "",
        references=references,
    )


def _mark_sent(item: OutboxItem) -> None:
    """Approved or needing no approval: the message goes to delivery (after commit)."""
    item.status = Status.SENT
    item.sent_at = timezone.now()
    item.delivery = DeliveryState.QUEUED
    item.next_attempt_at = timezone.now()
    transaction.on_commit(lambda: DELIVERIES.queue(item.pk))


def send(
    *,
    principal: Principal,
    inbox: Inbox,
    to: list[str],
    subject: str,
    text: str,
    cc: list[str] | None = None,
    html: str = "",
    reply_to_email: Any = None,
    reason: str = "",
    idempotency_key: str = "",
    body_hash: str = "",
) -> tuple[OutboxItem, bool]:
    """Creates the item; returns it and whether it was created now (False: an idempotent
    replay of an earlier request with the same key)."""
    if idempotency_key:
        earlier = OutboxItem.objects.filter(
            workspace=principal.workspace,
            idempotency_key=idempotency_key,
            created_at__gte=timezone.now() - IDEMPOTENCY_WINDOW,
        ).first()
        if earlier is not None:
            if earlier.request_hash != body_hash:
                raise ValidationFailed.at(
                    "Idempotency-Key", "This key was used with a different request."
                )
            return earlier, False
    if inbox.is_expired():
        raise InvalidState("The inbox has expired; extend it to send from it.")
    references: list[str] = []
    if reply_to_email is not None:
        references = [*reply_to_email.references, reply_to_email.message_id]
        references = [ref for ref in references if ref][-20:]
    approval = principal.requires_approval
    item = OutboxItem(
        workspace=principal.workspace,
        inbox=inbox,
        key=principal.key,
        kind=Kind.SEND,
        from_address=inbox.address,
        from_name=inbox.name,
        to=to,
        cc=cc or [],
        subject=subject,
        text=text,
        html=html,
        in_reply_to=reply_to_email.pk if reply_to_email is not None else "",
        reason=reason,
        status=Status.PENDING,
        approval_required=approval,
        message_id=mime.new_message_id(inbox.domain),
        idempotency_key=idempotency_key,
        request_hash=body_hash,
    )
    item.raw = _build(item, references)
    try:
        with transaction.atomic():
            if not approval:
                _mark_sent(item)
            item.save()
            _emit(item, OUTBOUND_PENDING if approval else OUTBOUND_SENT)
    except IntegrityError:  # the same key raced in from a retry
        earlier = OutboxItem.objects.get(
            workspace=principal.workspace, idempotency_key=idempotency_key
        )
        if earlier.request_hash != body_hash:
            raise ValidationFailed.at(
                "Idempotency-Key", "This key was used with a different request."
            ) from None
        return earlier, False
    return item, True


def send_request(
    *,
    principal: Principal,
    inbox: Inbox,
    data: dict[str, Any],
    idempotency_key: str = "",
    body_hash: str = "",
) -> tuple[OutboxItem, bool]:
    """:func:`send` with a validated send request (``SendIn``: REST and the MCP tool): the email
    it answers (``in_reply_to``) looked up in the caller's workspace, a ``validation_error`` on
    ``in_reply_to`` when there is none."""
    reply_to = None
    if data.get("in_reply_to"):
        try:
            reply_to = email_get(principal.workspace, data["in_reply_to"])
        except EmailNotFound:
            raise ValidationFailed.at("in_reply_to", "No such email.") from None
    return send(
        principal=principal,
        inbox=inbox,
        to=data["to"],
        cc=data["cc"],
        subject=data["subject"],
        text=data["text"],
        html=data["html"],
        reply_to_email=reply_to,
        reason=data["reason"],
        idempotency_key=idempotency_key,
        body_hash=body_hash,
    )


def decide(
    *,
    item: OutboxItem,
    user: Any,
    role: str | None,
    decision: str,
    note: str = "",
    subject: str | None = None,
    text: str | None = None,
    by: Actor,
) -> OutboxItem:
    """Approve (optionally with edits) or reject a pending item; exactly one decision wins.

    What is approved is what goes out: an edited text replaces the HTML part, if there is one,
    with :func:`outbox.parts.text_as_html` of the edited text (the approval page says so before
    the click), and a forwarded copy, sent as received, takes no edits."""
    if not role_may(role, "admin"):
        raise Forbidden("Only an owner or an admin may decide.")
    now = timezone.now()
    with transaction.atomic():
        locked = (
            OutboxItem.objects.select_for_update()
            .select_related("inbox")
            .get(workspace_id=item.workspace_id, pk=item.pk)
        )
        if locked.status != Status.PENDING:
            raise InvalidState(f"The item is {locked.status}, not pending.")
        locked.decided_by, locked.decided_at, locked.decision_note = user, now, note
        before = {"subject": locked.subject, "text": locked.text}
        if decision == "approve" and locked.kind == Kind.FORWARD:
            # Sent as received: the same subject or text given back is no edit, any other is.
            edited = [
                (path, value)
                for path, value, stored in (
                    ("subject", subject, locked.subject),
                    ("text", text, locked.text),
                )
                if value is not None and value != stored
            ]
            if edited:
                raise ValidationFailed.at(
                    edited[0][0], "A forwarded copy is sent as received; it cannot be edited."
                )
            _mark_sent(locked)
            locked.save()
            _emit(locked, OUTBOUND_SENT)
        elif decision == "approve":
            if subject is not None:
                locked.subject = subject
            if text is not None and text != locked.text:
                locked.text = text
                if locked.html:
                    locked.html = text_as_html(text)
            reply = []
            if locked.in_reply_to:
                original = Email.objects.filter(
                    workspace_id=locked.workspace_id, pk=locked.in_reply_to
                ).first()
                if original is not None:
                    reply = [*original.references, original.message_id]
            locked.raw = _build(locked, [r for r in reply if r][-20:])
            _mark_sent(locked)
            locked.save()
            _emit(locked, OUTBOUND_SENT)
        else:
            locked.status = Status.REJECTED
            locked.save()
            _emit(locked, OUTBOUND_REJECTED)
        changes: dict[str, dict[str, Any]] = {
            "to": {"after": locked.to},
            "note": {"after": note},
            "edited": {"after": before["text"] != locked.text},
        }
        if before["subject"] != locked.subject:
            changes["subject"] = {"before": before["subject"], "after": locked.subject}
        audit.record(
            workspace=locked.workspace_id,
            by=by,
            action="outbox.approved" if decision == "approve" else "outbox.rejected",
            target=Target("outbox_item", locked.pk, locked.subject),
            changes=changes,
        )
    return locked


def attempt_delivery(item_id: str) -> bool:
    """One delivery attempt of a sent item, if this worker wins the lease.

    The outcome is recorded the moment the relay accepts the message (before ``QUIT``), and the
    hand-over is marked just before the message goes out, so a worker killed in between leaves
    a mark: the next attempt sends again (SMTP prefers a duplicate to a loss) and says so.
    """
    if DELIVERIES.claim(item_id) is None:
        return False
    item = OutboxItem.objects.unscoped().select_related("inbox").get(pk=item_id)
    notes: list[str] = []
    if item.handover_at is not None:  # the last attempt stopped while the relay had the message
        item.interrupted_handovers += 1
        item.handover_at = None
        item.save(update_fields=["interrupted_handovers", "handover_at"])
    if item.interrupted_handovers:
        notes.append(INTERRUPTED_HANDOVER)
    raw = bytes(item.raw)
    recipients = list(dict.fromkeys([*item.to, *item.cc]))
    internal, external = transport.split_recipients(recipients)
    if internal and not item.internal_delivered:
        with transaction.atomic():  # the copies and the mark commit together: never twice
            refused = transport.deliver_internal(
                raw, mail_from=item.from_address, recipients=internal
            )
            notes += refused
            OutboxItem.objects.filter(workspace_id=item.workspace_id, pk=item.pk).update(
                internal_delivered=True
            )
        taken = [r for r in internal if not any(x.startswith(f"{r}:") for x in refused)]
        here = f"delivered through this service's pipeline to {', '.join(taken) or 'nobody'}"
    else:
        taken, here = [], ""
    if not external:
        if here and not taken:  # every hosted recipient refused it: nothing went anywhere
            failure = transport.Failure("no recipient accepted the message", permanent=True)
            _record_attempt(item, failure, notes)
        else:
            _record_attempt(item, None, notes, state=DeliveryState.INTERNAL, reply=here)
        return True
    if transport.capturing():
        reply = "; ".join(filter(None, [CAPTURED_REPLY, here]))
        _record_attempt(item, None, notes, state=DeliveryState.CAPTURED, reply=reply)
        return True

    def handing_over() -> None:
        OutboxItem.objects.filter(workspace_id=item.workspace_id, pk=item.pk).update(
            handover_at=timezone.now()
        )

    try:
        transport.deliver_external(
            raw,
            mail_from=item.from_address,
            recipients=external,
            on_handover=handing_over,
            on_accepted=lambda reply: _record_attempt(
                item, None, notes, reply="; ".join(filter(None, [reply, here]))
            ),
        )
    except transport.Failure as failure:
        _record_attempt(item, failure, notes)
    return True


def _record_attempt(
    item: OutboxItem,
    failure: transport.Failure | None,
    notes: list[str],
    *,
    state: str = DeliveryState.DONE,
    reply: str = "",
) -> None:
    """The outcome of an attempt, logged; a success is one UPDATE, sent the moment the relay
    said 250 (``state`` says where it went: the relay, this service's pipeline, or captured)."""
    now = timezone.now()
    item.attempts += 1
    item.leased_until = item.handover_at = None
    entry: dict[str, Any] = {"at": iso(now), "reply": None, "error": None}
    if failure is None:
        item.delivery, item.next_attempt_at = state, None
        item.error = "; ".join(notes)
        item.relay_reply = entry["reply"] = reply
        if state != DeliveryState.CAPTURED:
            item.delivered_at = now
    elif not failure.permanent and (retry_at := DELIVERIES.next_attempt(item.attempts, now)):
        item.delivery = DeliveryState.RETRYING
        item.next_attempt_at = retry_at
        item.error = entry["error"] = "; ".join([*notes, failure.message])
    else:
        item.delivery, item.next_attempt_at = DeliveryState.FAILED, None
        item.status = Status.FAILED
        item.error = entry["error"] = "; ".join([*notes, failure.message])
    item.attempt_log = [*(item.attempt_log or []), entry][-MAX_ATTEMPT_LOG:]
    fields = ["attempts", "leased_until", "handover_at", "delivery", "next_attempt_at", "error"]
    fields += ["attempt_log", "relay_reply", "delivered_at"]
    if item.status == Status.FAILED:
        with transaction.atomic():
            item.save(update_fields=[*fields, "status"])
            _emit(item, OUTBOUND_FAILED)
    else:
        item.save(update_fields=fields)
    if item.delivery == DeliveryState.RETRYING:
        countdown = max(0.0, (item.next_attempt_at - timezone.now()).total_seconds())
        DELIVERIES.queue(item.pk, countdown=countdown)


def sweep() -> int:
    """Hands due, unclaimed delivery attempts to workers (``config.work``): tasks the broker
    lost with a killed worker and, in embedded mode, retries."""
    return DELIVERIES.sweep(attempt_delivery)


def expire_pending(*, now: Any = None) -> int:
    """Pending items older than ``OUTBOX_APPROVAL_HOURS`` become ``expired``."""
    now = now or timezone.now()
    cutoff = now - timedelta(hours=settings.OUTBOX_APPROVAL_HOURS)
    count = 0
    due = OutboxItem.objects.unscoped().filter(status=Status.PENDING, created_at__lt=cutoff)
    for item_id, workspace_id in due.values_list("pk", "workspace_id")[:500]:
        with transaction.atomic():
            rows = OutboxItem.objects.filter(workspace_id=workspace_id, pk=item_id)
            if rows.filter(status=Status.PENDING).update(status=Status.EXPIRED):
                item = rows.select_related("inbox").get()
                _emit(item, OUTBOUND_EXPIRED)
                count += 1
    return count


def forward_approval(inbox: Inbox) -> str:
    """Why a forwarded copy made now must wait for approval ("" when it need not): the
    workspace's setting now, or the rule of whoever set ``forward_to`` (see ``FORWARD_TO_HELP``
    in ``inboxes.serializers``, the documented contract)."""
    if inbox.workspace.require_approval:
        return "the workspace requires approval"
    via = inbox.forward_set_via
    if not via:
        return "forwarding was set before its setter was recorded"
    if inbox.forward_requires_approval:
        return "the key that set forwarding requires approval"
    if via == ForwardSetter.API_KEY:
        key = ApiKey.objects.filter(
            workspace_id=inbox.workspace_id, pk=inbox.forward_set_by_key_id
        ).first()
        if key is None:
            return "the key that set forwarding was deleted"
        if key.revoked_at is not None:
            return "the key that set forwarding was revoked"
        if key.expires_at is not None and key.expires_at <= timezone.now():
            return "the key that set forwarding has expired"
        if key.require_approval:
            return "the key that set forwarding requires approval"
    elif via == ForwardSetter.SESSION and not (
        inbox.forward_set_by_user_id
        and Membership.objects.filter(
            workspace_id=inbox.workspace_id, user_id=inbox.forward_set_by_user_id
        ).exists()
    ):
        return "the member who set forwarding has left the workspace"
    return ""


def forward(*, inbox: Inbox, email: Email, raw: bytes) -> OutboxItem | None:
    """Copies a received message to the inbox's ``forward_to`` (never twice: loop guard), from
    the inbox's own address; the copy waits for approval when ``forward_approval`` says so."""
    if not inbox.forward_to or mime.has_loop_header(email.headers):
        return None
    copy, display_name = mime.forwarded(
        raw,
        inbox_address=inbox.address,
        sender_address=email.from_address,
        sender_name=email.from_name,
    )
    why = forward_approval(inbox)
    item = OutboxItem(
        workspace_id=inbox.workspace_id,
        inbox=inbox,
        key_id=inbox.forward_set_by_key_id,
        kind=Kind.FORWARD,
        from_address=inbox.address,
        from_name=display_name,
        to=[inbox.forward_to],
        subject=email.subject,
        text=email.text,
        html=email.html,
        status=Status.PENDING,
        approval_required=bool(why),
        reason=f"forward_to; waits for approval: {why}" if why else "forward_to",
        message_id=email.message_id,
        raw=copy,
    )
    with transaction.atomic():
        if not why:
            _mark_sent(item)
        item.save()
        _emit(item, OUTBOUND_PENDING if why else OUTBOUND_SENT)
    return item


def forward_received(records: Sequence[Event]) -> None:
    """In the transaction of ``email.received``: the copy for the inbox's ``forward_to``
    (an ``events.on_record`` hook that emits, registered by ``OutboxConfig.ready``)."""
    for event in records:
        if event.type == events.EMAIL_RECEIVED:
            _forward_received(event)


def forward_received_idle_if(workspace_id: str, inbox_id: str, type: str) -> bool:
    """``forward_received`` copies received mail only (``events.on_record``'s ``idle_if``)."""
    return type != events.EMAIL_RECEIVED


def _forward_received(event: Event) -> None:
    inbox = getattr(event, "hints", {}).get("inbox")
    if inbox is None:
        inbox = (
            Inbox.objects.filter(workspace_id=event.workspace_id, pk=event.inbox_id)
            .select_related("workspace")
            .first()
        )
    if inbox is None or not inbox.forward_to:
        return
    email_id = event.data["email"]["id"]
    email = (
        Email.objects.filter(workspace_id=event.workspace_id, pk=email_id)
        .only("headers", "subject", "from_address", "from_name", "text", "html", "message_id")
        .first()
    )
    raw = (
        RawMessage.objects.filter(email__workspace_id=event.workspace_id, email_id=email_id)
        .values_list("content", flat=True)
        .first()
    )
    if email is not None and raw is not None:
        forward(inbox=inbox, email=email, raw=bytes(raw))

"""The receive pipeline: the one function SMTP, internal delivery and tests go through.

``receive(raw, mail_from=..., rcpt_tos=[...])`` parses the message once, then for every inbox it
is addressed to decides (expiry, sender filters, cap), stores the email with its raw bytes and
attachments in one transaction, and emits the events. It never raises on message content: a
message that cannot be fully parsed is stored with what could be read, its defects noted and its
raw bytes kept. It returns one :class:`Delivery` per recipient so the SMTP front door can answer.

Order on receipt: store, extract, rules (in the receive transaction), then either
``email.received`` at once or — when the workspace has classifier labels — the classifier in a
worker (``mail.tasks.classify_email``, bounded by ``CLASSIFIER_TIMEOUT``) which then announces
the email with every label; ``email.labeled`` follows whenever labels were applied. Refusals emit
``mail.rejected`` on the inbox's stream.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from inboxes import selectors as inbox_selectors
from inboxes import services as inbox_services
from inboxes.addresses import sender_allowed, split_address
from inboxes.models import Inbox, Overflow, Source
from labels import rules
from labels import selectors as label_selectors
from labels import services as label_services
from mail.extraction import extract
from mail.htmltext import make_preview
from mail.models import Attachment, Email, RawMessage
from mail.parsing import Address, ParsedMessage, parse_message
from webhooks import events

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Refusal:
    """Why a recipient did not get the message, as an SMTP reply."""

    code: int
    status: str
    reason: str

    @property
    def smtp_reply(self) -> str:
        return f"{self.code} {self.status} {self.reason}"


NO_SUCH_INBOX = Refusal(550, "5.1.1", "No such mailbox here")
INBOX_EXPIRED = Refusal(550, "5.1.1", "Mailbox has expired")
SENDER_REFUSED = Refusal(550, "5.7.1", "Sender not accepted by this mailbox")
INBOX_FULL = Refusal(552, "5.2.2", "Mailbox full")
TOO_LARGE = Refusal(552, "5.3.4", "Message too big")


@dataclass(frozen=True)
class Delivery:
    recipient: str
    email_id: str | None = None
    inbox_id: str | None = None
    refusal: Refusal | None = None


def admit_recipient(address: str, mail_from: str = "") -> tuple[Refusal | None, Inbox | None]:
    """RCPT-time decision, and the inbox it found (``receive`` may reuse it for DATA).

    An expired inbox also gets ``mail.rejected`` on its stream. A catch-all address admits
    with no inbox yet: DATA creates it.
    """
    now = timezone.now()
    inbox = inbox_selectors.inbox_for_recipient(address)
    if inbox is None:
        local, domain = split_address(address)
        if local and inbox_selectors.catch_all_domain(domain) is not None:
            return None, None
        return NO_SUCH_INBOX, None
    if inbox.is_expired(now):
        with transaction.atomic():
            _emit_rejected(inbox, mail_from.lower(), INBOX_EXPIRED)
        return INBOX_EXPIRED, None
    return None, inbox


def refuse_recipient(address: str, mail_from: str = "") -> Refusal | None:
    """RCPT-time decision only (see :func:`admit_recipient`)."""
    return admit_recipient(address, mail_from)[0]


def note_oversized(rcpt_tos: Sequence[str], mail_from: str) -> None:
    """Records ``mail.rejected`` for a message refused as too big before it was read."""
    seen: set[str] = set()
    for recipient in rcpt_tos:
        inbox = inbox_selectors.inbox_for_recipient(recipient)
        if inbox is not None and inbox.pk not in seen:
            seen.add(inbox.pk)
            with transaction.atomic():
                _emit_rejected(inbox, mail_from.lower(), TOO_LARGE)


def _address_dicts(addresses: Sequence[Address]) -> list[dict[str, str]]:
    return [{"address": a.address, "name": a.name} for a in addresses]


@dataclass
class _Prepared:
    """Everything about the message that does not depend on the inbox: computed once."""

    raw: bytes
    sha256: str
    parsed: ParsedMessage
    sender: str
    preview: str
    extracted: dict
    search_text: str
    received_at: datetime


def _prepare(raw: bytes, mail_from: str, received_at: datetime) -> _Prepared:
    parsed = parse_message(raw)
    sender = (parsed.from_.address if parsed.from_ and parsed.from_.address else mail_from).lower()
    preview = make_preview(parsed.text, parsed.html)
    try:
        extracted = dict(
            extract(
                subject=parsed.subject,
                text=parsed.text,
                html=parsed.html,
                list_unsubscribe=parsed.header("List-Unsubscribe"),
            )
        )
    except Exception:  # extraction is best effort; the message is stored regardless
        logger.exception("extraction failed")
        extracted = {"code": None, "link": None, "codes": [], "links": []}
    name = parsed.from_.name if parsed.from_ else ""
    search_text = " ".join([sender, name, parsed.subject, preview]).lower()
    return _Prepared(
        raw=raw,
        sha256=hashlib.sha256(raw).hexdigest(),
        parsed=parsed,
        sender=sender,
        preview=preview,
        extracted=extracted,
        search_text=search_text,
        received_at=received_at,
    )


def _resolve_inbox(recipient: str, now: datetime, known: Inbox | None = None) -> Inbox | Refusal:
    inbox = known or inbox_selectors.inbox_for_recipient(recipient)
    if inbox is None:
        local, domain = split_address(recipient)
        catch_all = inbox_selectors.catch_all_domain(domain) if local else None
        if catch_all is None:
            return NO_SUCH_INBOX
        local = local.split("+", 1)[0]
        try:
            inbox = inbox_services.inbox_create(
                workspace=catch_all.workspace,
                source=Source.CATCH_ALL,
                local_part=local,
                domain=domain,
            )
        except Exception:  # raced with another receiver creating it, or an invalid local part
            inbox = inbox_selectors.inbox_for_recipient(recipient)
            if inbox is None:
                return NO_SUCH_INBOX
    if inbox.is_expired(now):
        return INBOX_EXPIRED
    return inbox


def _emit_rejected(inbox: Inbox, sender: str, refusal: Refusal) -> None:
    events.emit(
        workspace_id=inbox.workspace_id,
        inbox_id=inbox.pk,
        type=events.MAIL_REJECTED,
        data={
            "inbox": inbox_services.inbox_record(inbox),
            "from": sender,
            "reason": refusal.reason,
            "code": refusal.code,
        },
    )


def _make_room(inbox: Inbox) -> Refusal | None:
    """Applies the cap under the inbox row lock: refuse, or drop the oldest emails."""
    if inbox.max_emails is None or inbox.email_count < inbox.max_emails:
        return None
    if inbox.overflow == Overflow.REJECT:
        return INBOX_FULL
    excess = inbox.email_count - inbox.max_emails + 1
    oldest = list(
        Email.objects.filter(inbox=inbox).order_by("pk").values_list("pk", "read")[:excess]
    )
    Email.objects.filter(pk__in=[pk for pk, _ in oldest]).delete()
    unread = sum(1 for _, read in oldest if not read)
    Inbox.objects.filter(pk=inbox.pk).update(
        email_count=F("email_count") - len(oldest), unread_count=F("unread_count") - unread
    )
    for pk, _ in oldest:
        events.emit(
            workspace_id=inbox.workspace_id,
            inbox_id=inbox.pk,
            type=events.EMAIL_DELETED,
            data={
                "inbox": inbox_services.inbox_record(inbox),
                "email": {"id": pk},
                "reason": "overflow",
            },
        )
    return None


def email_event_data(inbox: Inbox, email: Email, labels: list[dict]) -> dict:
    """The ``data`` of ``email.received`` (the webhook payload's layout)."""
    return {
        "inbox": inbox_services.inbox_record(inbox),
        "email": {
            "id": email.pk,
            "from": {"address": email.from_address, "name": email.from_name},
            "subject": email.subject,
            "snippet": email.preview,
            "labels": labels,
            "verification": {
                "code": email.extracted.get("code"),
                "link": email.extracted.get("link"),
            },
            "received_at": email.received_at.isoformat().replace("+00:00", "Z"),
        },
    }


def _store(inbox: Inbox, prepared: _Prepared, mail_from: str, recipient: str) -> Email | Refusal:
    parsed = prepared.parsed
    with transaction.atomic():
        locked = Inbox.objects.select_for_update().get(pk=inbox.pk)
        refusal = _make_room(locked)
        if refusal is not None:
            return refusal
        enabled = label_selectors.enabled_labels(locked.workspace_id)
        classify = inbox.workspace.classifier_enabled and any(x.instructions for x in enabled)
        email = Email.objects.create(
            workspace_id=locked.workspace_id,
            inbox=locked,
            message_id=parsed.message_id[:998],
            envelope_from=mail_from[:320],
            envelope_to=recipient[:320],
            from_address=(parsed.from_.address if parsed.from_ else "")[:320],
            from_name=(parsed.from_.name if parsed.from_ else "")[:320],
            to=_address_dicts(parsed.to),
            cc=_address_dicts(parsed.cc),
            reply_to=_address_dicts(parsed.reply_to),
            subject=parsed.subject,
            text=parsed.text,
            html=parsed.html,
            headers=[[name, value] for name, value in parsed.headers],
            preview=prepared.preview,
            search_text=prepared.search_text,
            size=len(prepared.raw),
            in_reply_to=parsed.in_reply_to[:998],
            references=parsed.references,
            extracted=prepared.extracted,
            defects=parsed.defects,
            has_attachments=bool(parsed.attachments),
            received_at=prepared.received_at,
            # Announced in this very transaction unless the classifier is to answer first.
            announced_at=None if classify else timezone.now(),
        )
        RawMessage.objects.create(email=email, content=prepared.raw, sha256=prepared.sha256)
        Attachment.objects.bulk_create(
            Attachment(
                email=email,
                position=position,
                filename=part.filename[:255],
                content_type=part.content_type[:255] or "application/octet-stream",
                size=len(part.content),
                content_id=part.content_id[:998],
                inline=part.inline,
                content=part.content,
            )
            for position, part in enumerate(parsed.attachments)
        )
        Inbox.objects.filter(pk=locked.pk).update(
            email_count=F("email_count") + 1,
            unread_count=F("unread_count") + 1,
            last_email_at=prepared.received_at,
        )
        labels = label_services.rules_apply(
            workspace_id=locked.workspace_id,
            email_id=email.pk,
            facts=_rule_facts(prepared),
            labels=enabled,
        )
        if classify:
            # The classifier answers in a worker, bounded by CLASSIFIER_TIMEOUT; the worker
            # announces the email (email.received with every label). The row is the truth:
            # announced_at stays null until then, and a sweeper covers a lost task.
            transaction.on_commit(lambda: _classify_later(email.pk))
        else:
            _announce_new(email=email, inbox=locked, labels=labels)
    return email


def _rule_facts(prepared: _Prepared) -> rules.Facts:
    parsed = prepared.parsed
    return rules.Facts(
        from_address=parsed.from_.address if parsed.from_ else "",
        from_name=parsed.from_.name if parsed.from_ else "",
        to=[a.address for a in (*parsed.to, *parsed.cc)],
        subject=parsed.subject,
        text=parsed.text,
        html=parsed.html,
        headers=parsed.headers,
        attachment_names=[a.filename for a in parsed.attachments if a.filename],
    )


def _classify_later(email_id: str) -> None:
    from mail.tasks import classify_email

    classify_email.delay(email_id)


def announce(*, email: Email, inbox: Inbox, late: Sequence[dict] = ()) -> bool:
    """Emits ``email.received`` (labels included) and ``email.labeled`` once per email.

    Called in the receive transaction when no classifier is involved, else by the classifier
    task or the overdue sweeper; the conditional update makes it happen exactly once.
    """
    with transaction.atomic():
        claimed = Email.objects.filter(pk=email.pk, announced_at__isnull=True).update(
            announced_at=timezone.now()
        )
        if claimed != 1:
            return False
        labels = label_selectors.labels_of_email(email.pk)
        events.emit(
            workspace_id=inbox.workspace_id,
            inbox_id=inbox.pk,
            type=events.EMAIL_RECEIVED,
            data=email_event_data(inbox, email, labels),
        )
        if labels:
            emit_labeled(email=email, inbox=inbox, labels=labels)
    return True


def _announce_new(*, email: Email, inbox: Inbox, labels: list[dict]) -> None:
    """``announce`` for an email created (with ``announced_at`` set) in this transaction: no
    claim needed, and the labels are the ones the rules just applied."""
    events.emit(
        workspace_id=inbox.workspace_id,
        inbox_id=inbox.pk,
        type=events.EMAIL_RECEIVED,
        data=email_event_data(inbox, email, labels),
        hints={"inbox": inbox},
    )
    if labels:
        emit_labeled(email=email, inbox=inbox, labels=labels)


def emit_labeled(*, email: Email, inbox: Inbox, labels: Sequence[dict]) -> None:
    """``email.labeled`` with the labels just applied."""
    events.emit(
        workspace_id=inbox.workspace_id,
        inbox_id=inbox.pk,
        type=events.EMAIL_LABELED,
        data={
            "inbox": inbox_services.inbox_record(inbox),
            "email": email_event_data(inbox, email, list(labels))["email"],
            "labels": list(labels),
        },
    )


def receive(
    raw: bytes,
    *,
    mail_from: str = "",
    rcpt_tos: Sequence[str],
    received_at: datetime | None = None,
    admitted: Mapping[str, Inbox] | None = None,
) -> list[Delivery]:
    """Delivers ``raw`` to every recipient's inbox; one :class:`Delivery` per recipient.

    ``admitted`` maps recipients to the inboxes :func:`admit_recipient` found moments ago in
    the same SMTP transaction; expiry is checked again and the row is locked and re-read
    before anything is stored.
    """
    now = received_at or timezone.now()
    if len(raw) > settings.MAX_MESSAGE_BYTES:
        return [Delivery(recipient=r, refusal=TOO_LARGE) for r in rcpt_tos]
    prepared = _prepare(raw, mail_from, now)
    deliveries: list[Delivery] = []
    stored_in: dict[str, str] = {}  # inbox id -> email id: one copy per inbox
    for recipient in rcpt_tos:
        resolved = _resolve_inbox(recipient, now, (admitted or {}).get(recipient))
        if isinstance(resolved, Refusal):
            deliveries.append(Delivery(recipient=recipient, refusal=resolved))
            continue
        inbox = resolved
        if inbox.pk in stored_in:
            deliveries.append(Delivery(recipient, email_id=stored_in[inbox.pk], inbox_id=inbox.pk))
            continue
        if not sender_allowed(
            prepared.sender, allow=inbox.allow_senders, block=inbox.block_senders
        ):
            with transaction.atomic():
                _emit_rejected(inbox, prepared.sender, SENDER_REFUSED)
            deliveries.append(Delivery(recipient, inbox_id=inbox.pk, refusal=SENDER_REFUSED))
            continue
        outcome = _store(inbox, prepared, mail_from, recipient)
        if isinstance(outcome, Refusal):
            with transaction.atomic():
                _emit_rejected(inbox, prepared.sender, outcome)
            deliveries.append(Delivery(recipient, inbox_id=inbox.pk, refusal=outcome))
            continue
        stored_in[inbox.pk] = outcome.pk
        deliveries.append(Delivery(recipient, email_id=outcome.pk, inbox_id=inbox.pk))
    return deliveries


def receive_one(raw: bytes, *, to: str, mail_from: str = "") -> Delivery:
    """Convenience for one recipient (internal delivery, tests)."""
    return receive(raw, mail_from=mail_from, rcpt_tos=[to])[0]

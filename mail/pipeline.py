"""The receive pipeline: the one path SMTP, internal delivery and tests go through.

``receive(raw, mail_from=..., rcpt_tos=[...])`` parses the message once, then for every inbox it
is addressed to decides (expiry, sender filters, cap), stores the email with its raw bytes and
attachments in one transaction, and emits the events. ``receive_many`` does the same for a batch
of messages in one transaction (the SMTP front door's group commit); ``receive`` is a batch of
one. It never raises on message content: a
message that cannot be fully parsed is stored with what could be read, its defects noted and its
raw bytes kept. It returns one :class:`Receipt` per recipient so the SMTP front door can answer.

Order on receipt: store, extract, rules (in the receive transaction), then either
``email.received`` at once or — when the workspace has classifier labels — the classifier in a
worker (``mail.tasks.classify_email``, bounded by ``CLASSIFIER_TIMEOUT``) which then announces
the email with every label; ``email.labeled`` follows whenever labels were applied. Refusals emit
``mail.rejected`` on the inbox's stream.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone

from config.api.timestamps import iso
from config.rows import bulk_insert
from events import services as events
from inboxes import selectors as inbox_selectors
from inboxes import services as inbox_services
from inboxes.addresses import canonical_address, sender_allowed, split_address
from inboxes.models import Inbox, Overflow, Source
from labels import rules
from labels import selectors as label_selectors
from labels import services as label_services
from labels.models import EmailLabel, Label
from mail import selectors as mail_selectors
from mail.authentication import results as authentication_results
from mail.message.extraction import extract
from mail.message.htmltext import make_preview
from mail.message.parsing import Address, ParsedAttachment, ParsedMessage, parse_message
from mail.models import Attachment, Email, RawMessage

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
# The sandbox credential of the session was revoked (or its inbox deleted) before its mail was
# stored.
CREDENTIAL_REVOKED = Refusal(550, "5.7.8", "Authentication credentials no longer valid")


# An email records at most this many envelope recipients (the SMTP receiver takes no more in
# one transaction: mail.smtpd.server.MAX_RECIPIENTS).
MAX_ENVELOPE_RECIPIENTS = 100


@dataclass(frozen=True)
class Receipt:
    """What became of a message for one recipient: the email it is stored as, or the refusal."""

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


def note_injected_fault(
    inbox_id: str, mail_from: str, *, code: int, reason: str, stage: str, mode: str
) -> None:
    """Records a fault the SMTP receiver injected (the inbox's ``smtp_faults``): ``injected_faults``
    + 1 and ``mail.rejected`` with ``injected: true``, in one transaction."""
    with transaction.atomic():
        inbox = Inbox.objects.unscoped().filter(pk=inbox_id).first()
        if inbox is None:  # deleted since RCPT
            return
        Inbox.objects.unscoped().filter(pk=inbox_id).update(
            injected_faults=F("injected_faults") + 1
        )
        change = _rejected(inbox, mail_from.lower(), Refusal(code, "", reason))
        change.data.update({"injected": True, "stage": stage, "mode": mode})
        events.emit_many([change])


def _address_dicts(addresses: Sequence[Address]) -> list[dict[str, str]]:
    return [{"address": a.address, "name": a.name} for a in addresses]


@dataclass
class Digest:
    """The message digested: everything about it that does not depend on the inbox (parse,
    sender, preview, extraction, search text), computed once."""

    raw: bytes
    sha256: str
    parsed: ParsedMessage
    sender: str
    preview: str
    extracted: dict
    search_text: str
    received_at: datetime


def _digest_of(raw: bytes, mail_from: str, received_at: datetime) -> Digest:
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
    return Digest(
        raw=raw,
        sha256=hashlib.sha256(raw).hexdigest(),
        parsed=parsed,
        sender=sender,
        preview=preview,
        extracted=extracted,
        search_text=search_text,
        received_at=received_at,
    )


def _emit_rejected(inbox: Inbox, sender: str, refusal: Refusal) -> None:
    events.emit_many([_rejected(inbox, sender, refusal)])


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
            "received_at": iso(email.received_at),
            "authentication": email.authentication,
        },
    }


def _rule_facts(digest: Digest, authentication: dict | None) -> rules.Facts:
    parsed = digest.parsed
    return rules.Facts(
        from_address=parsed.from_.address if parsed.from_ else "",
        from_name=parsed.from_.name if parsed.from_ else "",
        to=[a.address for a in (*parsed.to, *parsed.cc)],
        subject=parsed.subject,
        text=parsed.text,
        html=parsed.html,
        headers=parsed.headers,
        attachment_names=[a.filename for a in parsed.attachments if a.filename],
        authentication=authentication_results(authentication),
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
        claimed = Email.objects.filter(
            workspace_id=email.workspace_id, pk=email.pk, announced_at__isnull=True
        ).update(announced_at=timezone.now())
        if claimed != 1:
            return False
        labels = label_selectors.labels_of_email(email)
        events.emit_many(_announcement(inbox, email, labels))
    return True


def emit_labeled(*, email: Email, inbox: Inbox, labels: Sequence[dict]) -> None:
    """``email.labeled`` with the labels just applied."""
    events.emit_many([_labeled(inbox, email, labels)])


@dataclass(frozen=True)
class Incoming:
    """One message as an SMTP transaction (or internal delivery) hands it over."""

    raw: bytes
    mail_from: str
    rcpt_tos: Sequence[str]
    received_at: datetime | None = None
    # Recipients -> the ids of the inboxes admit_recipient() found at RCPT time in the same
    # transaction (plain ids: a batch may be written by another process, mail.smtpd.writer).
    admitted: Mapping[str, str] | None = None
    # The message parsed and extracted already (digested()), else receive_many() does it.
    digest: Digest | None = None
    # The SMTP session's client address and HELO name, and the message's SPF, DKIM, DMARC and
    # ARC verdicts (mail.authentication.check, run by the smtpd before the batch); None: not
    # checked (MAIL_AUTH_CHECKS off, or not received over SMTP).
    client_ip: str = ""
    helo: str = ""
    authentication: dict | None = None
    # Sent in a session authenticated with this sandbox SMTP credential (an id): the message is
    # stored once, in the credential's inbox, for every recipient, whatever their addresses.
    credential: str | None = None


def digested(incoming: Incoming) -> Incoming:
    """``incoming`` with its parse and extraction done now (what does not depend on the inbox);
    as it is if that is done already, or if it is over ``MAX_MESSAGE_BYTES`` (refused unread).

    ``receive_many`` digests what is not digested yet; the smtpd digests at the end of DATA,
    in its own process, so that the writer process (``mail.smtpd.writer``) only stores and the two
    work on different batches at once."""
    if incoming.digest is not None or len(incoming.raw) > settings.MAX_MESSAGE_BYTES:
        return incoming
    received_at = incoming.received_at or timezone.now()
    return dataclasses.replace(
        incoming,
        received_at=received_at,
        digest=_digest_of(incoming.raw, incoming.mail_from, received_at),
    )


def receive(
    raw: bytes,
    *,
    mail_from: str = "",
    rcpt_tos: Sequence[str],
    received_at: datetime | None = None,
    admitted: Mapping[str, str] | None = None,
) -> list[Receipt]:
    """Delivers ``raw`` to every recipient's inbox; one :class:`Receipt` per recipient."""
    return receive_many([Incoming(raw, mail_from, rcpt_tos, received_at, admitted)])[0]


def receive_many(messages: Sequence[Incoming]) -> list[list[Receipt]]:
    """Delivers a batch of messages in one transaction; per message, one :class:`Receipt`
    per recipient.

    The SMTP front door stores the messages that arrive together as one batch (group commit):
    one lock of every inbox concerned, bulk inserts of the emails, raw bytes, attachments,
    labels and events, one commit. Either all of the batch is stored or none of it (an
    exception propagates; the caller retries the messages one by one). Each message is parsed
    once, whatever its number of recipients; each inbox gets one copy.
    """
    digests = [digested(m).digest for m in messages]  # None: over MAX_MESSAGE_BYTES
    with transaction.atomic():
        batch = _Batch(messages, digests)
        return batch.store()


@dataclass
class _Copy:
    """One stored copy: the email, its rows and what its announcement needs."""

    inbox: Inbox
    email: Email
    digest: Digest
    labels: list[EmailLabel]
    classify: bool


class _Batch:
    """The work of :func:`receive_many` inside its transaction."""

    def __init__(self, messages: Sequence[Incoming], digests: Sequence[Digest | None]) -> None:
        self.messages, self.digests = messages, digests
        self.changes: list[events.Change] = []
        self.copies: list[_Copy] = []
        self.targets: list[list[tuple[str, str | None]]] = []  # per message: (recipient, inbox)

    def store(self) -> list[list[Receipt]]:
        inboxes = self._lock_inboxes()
        enabled = self._enabled_labels({inbox.workspace_id for inbox in inboxes.values()})
        counts = {pk: inbox.email_count for pk, inbox in inboxes.items()}
        results = []
        for message, digest, targets in zip(self.messages, self.digests, self.targets, strict=True):
            results.append(self._deliver(message, digest, targets, inboxes, enabled, counts))
        self._write(inboxes)
        return results

    def _lock_inboxes(self) -> dict[str, Inbox]:
        """Every inbox of the batch, locked in id order (two batches never deadlock) and read
        afresh; catch-all addresses get their inbox first. An inbox admitted at RCPT is a hint:
        if it has gone since (deleted, perhaps re-created under the same address), the address
        is looked up again."""
        sandbox = self._sandbox_inboxes()
        hints = [dict(m.admitted or {}) if m.credential is None else {} for m in self.messages]
        unhinted = {
            r
            for m, hinted in zip(self.messages, hints, strict=True)
            if m.credential is None
            for r in m.rcpt_tos
        } - {r for hinted in hints for r in hinted}
        found = self._lookup(unhinted) if unhinted else {}  # SMTP admitted them all at RCPT
        inboxes = inbox_selectors.inboxes_locked(
            sorted(
                {
                    *found.values(),
                    *(pk for hinted in hints for pk in hinted.values()),
                    *sandbox.values(),
                }
            )
        )
        stale = {r for hinted in hints for r, pk in hinted.items() if pk not in inboxes}
        if stale:
            again = self._lookup(stale)
            found |= again
            inboxes |= inbox_selectors.inboxes_locked(sorted(set(again.values()) - set(inboxes)))
        # Hinted or found, an inbox on a custom domain its workspace has not verified (or no
        # longer has) gets nothing: it is left out, so its recipients are unknown here.
        inboxes = inbox_selectors.inboxes_receiving(inboxes)
        for message, hinted in zip(self.messages, hints, strict=True):
            if message.credential is not None:  # every recipient: the credential's inbox
                inbox_id = sandbox.get(message.credential)
                self.targets.append([(r, inbox_id) for r in message.rcpt_tos])
                continue
            self.targets.append(
                [
                    (r, hinted[r] if r in hinted and r not in stale else found.get(r))
                    for r in message.rcpt_tos
                ]
            )
        return inboxes

    def _sandbox_inboxes(self) -> dict[str, str]:
        """Credential id -> inbox id of the batch's sandbox messages whose credential is still
        active (read in the storing transaction: a credential revoked since AUTH stores
        nothing). No query for a batch without any."""
        credentials = {m.credential for m in self.messages if m.credential is not None}
        return inbox_selectors.smtp_credential_inboxes(credentials) if credentials else {}

    @staticmethod
    def _lookup(recipients: set[str]) -> dict[str, str]:
        """Recipient -> inbox id for those that have an inbox (catch-all ones created now)."""
        canonical = {r: canonical_address(r) for r in recipients}
        ids = inbox_selectors.inbox_ids_for_addresses(set(canonical.values()) - {""})
        found: dict[str, str] = {}
        for recipient, address in canonical.items():
            inbox_id = ids.get(address) or _catch_all_inbox(recipient)
            if inbox_id is not None:
                found[recipient] = ids[address] = inbox_id
        return found

    @staticmethod
    def _enabled_labels(workspace_ids: set[str]) -> dict[str, list[Label]]:
        by_workspace: dict[str, list[Label]] = {pk: [] for pk in workspace_ids}
        for label in label_selectors.enabled_labels_of(workspace_ids):
            by_workspace[label.workspace_id].append(label)
        return by_workspace

    def _deliver(
        self,
        message: Incoming,
        digest: Digest | None,
        targets: list[tuple[str, str | None]],
        inboxes: dict[str, Inbox],
        enabled: dict[str, list[Label]],
        counts: dict[str, int],
    ) -> list[Receipt]:
        if digest is None:
            return [Receipt(recipient=r, refusal=TOO_LARGE) for r in message.rcpt_tos]
        receipts: list[Receipt] = []
        stored_in: dict[str, Email] = {}  # inbox id -> the email: one copy per inbox
        for recipient, inbox_id in targets:
            inbox = inboxes.get(inbox_id or "")
            if inbox is None:
                refusal = NO_SUCH_INBOX if message.credential is None else CREDENTIAL_REVOKED
                receipts.append(Receipt(recipient=recipient, refusal=refusal))
                continue
            if inbox.pk in stored_in:
                email = stored_in[inbox.pk]
                if len(email.envelope_recipients) < MAX_ENVELOPE_RECIPIENTS:
                    email.envelope_recipients.append(recipient[:320])
                receipts.append(Receipt(recipient, email.pk, inbox.pk))
                continue
            refusal = self._refusal(inbox, digest, counts)
            if refusal is not None:
                self.changes.append(_rejected(inbox, digest.sender, refusal))
                receipts.append(Receipt(recipient, inbox_id=inbox.pk, refusal=refusal))
                continue
            copy = self._copy(inbox, digest, message, recipient, enabled[inbox.workspace_id])
            counts[inbox.pk] += 1
            stored_in[inbox.pk] = copy.email
            receipts.append(Receipt(recipient, email_id=copy.email.pk, inbox_id=inbox.pk))
        return receipts

    @staticmethod
    def _refusal(inbox: Inbox, digest: Digest, counts: dict[str, int]) -> Refusal | None:
        if inbox.is_expired(digest.received_at):
            return INBOX_EXPIRED
        if not sender_allowed(digest.sender, allow=inbox.allow_senders, block=inbox.block_senders):
            return SENDER_REFUSED
        full = inbox.max_emails is not None and counts[inbox.pk] >= inbox.max_emails
        if full and inbox.overflow == Overflow.REJECT:
            return INBOX_FULL
        return None  # drop_oldest makes room once the batch is written

    def _copy(
        self,
        inbox: Inbox,
        digest: Digest,
        message: Incoming,
        recipient: str,
        enabled: list[Label],
    ) -> _Copy:
        email = _email(inbox, digest, message.mail_from, recipient)
        email.authentication = message.authentication
        classify = inbox.workspace.classifier_enabled and any(x.instructions for x in enabled)
        # Announced in this very transaction unless the classifier is to answer first.
        email.announced_at = None if classify else timezone.now()
        labels = label_services.rule_labels(
            email_id=email.pk, facts=_rule_facts(digest, message.authentication), labels=enabled
        )
        copy = _Copy(inbox, email, digest, labels, classify)
        self.copies.append(copy)
        if not classify:
            self.changes.extend(_announcement(inbox, email, label_services.label_dicts(labels)))
        return copy

    def _write(self, inboxes: dict[str, Inbox]) -> None:
        """The inserts of the batch, the room drop_oldest needs, the counters, the events."""
        if self.copies:
            emails = bulk_insert(Email, (c.email for c in self.copies))
            bulk_insert(
                RawMessage,
                (
                    RawMessage(email=email, content=c.digest.raw, sha256=c.digest.sha256)
                    for c, email in zip(self.copies, emails, strict=True)
                ),
            )
            bulk_insert(
                Attachment,
                (
                    _attachment(c.email, position, part)
                    for c in self.copies
                    for position, part in enumerate(c.digest.parsed.attachments)
                ),
            )
            label_services.labels_store([row for c in self.copies for row in c.labels])
        changed: dict[str, Inbox] = {}
        sizes = _stored_sizes(self.copies)
        for copy in self.copies:
            inbox = copy.inbox
            inbox.email_count += 1
            inbox.unread_count += 1
            inbox.stored_bytes += sizes[copy.email.pk]
            inbox.last_email_at = max(
                inbox.last_email_at or copy.email.received_at, copy.email.received_at
            )
            changed[inbox.pk] = inbox
        for inbox in changed.values():
            if inbox.max_emails is not None and inbox.email_count > inbox.max_emails:
                self.changes.extend(_make_room(inbox))
        inbox_services.inbox_counters_save(changed.values())
        events.emit_many(self.changes)
        classify = [c.email.pk for c in self.copies if c.classify]
        if classify:
            # The classifier answers in a worker, bounded by CLASSIFIER_TIMEOUT; the worker
            # announces the email (email.received with every label). The row is the truth:
            # announced_at stays null until then, and a sweeper covers a lost task.
            transaction.on_commit(lambda: [_classify_later(pk) for pk in classify])


def _catch_all_inbox(recipient: str) -> str | None:
    """The inbox a catch-all domain makes for ``recipient`` (created now), if any."""
    local, domain = split_address(recipient)
    catch_all = inbox_selectors.catch_all_domain(domain) if local else None
    if catch_all is None:
        return None
    try:
        with transaction.atomic():
            inbox = inbox_services.inbox_create(
                workspace=catch_all.workspace,
                source=Source.CATCH_ALL,
                local_part=local.split("+", 1)[0],
                domain=domain,
            )
    except Exception:  # raced with another receiver creating it, or an invalid local part
        inbox = inbox_selectors.inbox_for_recipient(recipient)
    return inbox.pk if inbox is not None else None


def _email(inbox: Inbox, digest: Digest, mail_from: str, recipient: str) -> Email:
    parsed = digest.parsed
    return Email(
        workspace_id=inbox.workspace_id,
        inbox=inbox,
        message_id=parsed.message_id[:998],
        envelope_from=mail_from[:320],
        envelope_to=recipient[:320],
        envelope_recipients=[recipient[:320]],
        from_address=(parsed.from_.address if parsed.from_ else "")[:320],
        from_name=(parsed.from_.name if parsed.from_ else "")[:320],
        to=_address_dicts(parsed.to),
        cc=_address_dicts(parsed.cc),
        reply_to=_address_dicts(parsed.reply_to),
        subject=parsed.subject,
        text=parsed.text,
        html=parsed.html,
        headers=[[name, value] for name, value in parsed.headers],
        preview=digest.preview,
        search_text=digest.search_text,
        size=len(digest.raw),
        in_reply_to=parsed.in_reply_to[:998],
        references=parsed.references,
        extracted=digest.extracted,
        defects=parsed.defects,
        has_attachments=bool(parsed.attachments),
        received_at=digest.received_at,
    )


def stored_size(digest: Digest) -> int:
    """The bytes one copy of a message is written as: the raw message, plus every attachment
    kept apart from it (one with a span is read from the raw message and keeps no bytes of its
    own); what :func:`_attachment` stores, counted the same way. What the copy adds to its
    inbox's ``stored_bytes`` where the database does not compress (SQLite)."""
    return len(digest.raw) + sum(
        len(part.content) for part in digest.parsed.attachments if part.span is None
    )


def _stored_sizes(copies: Sequence[_Copy]) -> dict[str, int]:
    """Email id -> what each stored copy adds to its inbox's ``stored_bytes`` (see
    ``mail.selectors.stored_bytes_of``): on PostgreSQL the stored sizes read back from the
    rows just inserted, after TOAST compression (one query per batch); elsewhere the bytes as
    written, with no query."""
    if not copies:
        return {}
    if connection.vendor != "postgresql":
        return {c.email.pk: stored_size(c.digest) for c in copies}
    apart = [
        c.email.pk for c in copies if any(part.span is None for part in c.digest.parsed.attachments)
    ]
    return mail_selectors.stored_sizes([c.email.pk for c in copies], apart)


def _attachment(email: Email, position: int, part: ParsedAttachment) -> Attachment:
    """The attachment's row: its span of the raw message if parsing gave one (read back with
    ``parsing.decode_part``), else its bytes."""
    start, end = part.span or (None, None)
    lazy = part.span is not None
    return Attachment(
        email=email,
        position=position,
        filename=part.filename[:255],
        content_type=part.content_type[:255] or "application/octet-stream",
        size=len(part.content),
        content_id=part.content_id[:998],
        inline=part.inline,
        content=None if lazy else part.content,
        raw_start=start,
        raw_end=end,
        transfer_encoding=part.transfer_encoding if lazy else "",
    )


def _make_room(inbox: Inbox) -> list[events.Change]:
    """drop_oldest: deletes the oldest emails beyond the cap (the inbox row is locked and its
    counters are the batch's); returns their ``email.deleted`` events."""
    excess = inbox.email_count - (inbox.max_emails or 0)
    oldest = list(
        Email.objects.filter(inbox=inbox).order_by("pk").values_list("pk", "read")[:excess]
    )
    ids = [pk for pk, _ in oldest]
    inbox.stored_bytes -= mail_selectors.stored_bytes_of(inbox.workspace_id, ids)
    Email.objects.filter(inbox=inbox, pk__in=ids).delete()
    inbox.email_count -= len(oldest)
    inbox.unread_count -= sum(1 for _, read in oldest if not read)
    return [
        events.Change(
            workspace_id=inbox.workspace_id,
            inbox_id=inbox.pk,
            type=events.EMAIL_DELETED,
            data={
                "inbox": inbox_services.inbox_record(inbox),
                "email": {"id": pk},
                "reason": "overflow",
            },
        )
        for pk, _ in oldest
    ]


def _rejected(inbox: Inbox, sender: str, refusal: Refusal) -> events.Change:
    return events.Change(
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


def _announcement(inbox: Inbox, email: Email, labels: list[dict]) -> list[events.Change]:
    """``email.received`` (and ``email.labeled`` when labels were applied) of a new email."""
    received = events.Change(
        workspace_id=inbox.workspace_id,
        inbox_id=inbox.pk,
        type=events.EMAIL_RECEIVED,
        data=email_event_data(inbox, email, labels),
        hints={"inbox": inbox},
    )
    if not labels:
        return [received]
    return [received, _labeled(inbox, email, labels)]


def _labeled(inbox: Inbox, email: Email, labels: Sequence[dict]) -> events.Change:
    return events.Change(
        workspace_id=inbox.workspace_id,
        inbox_id=inbox.pk,
        type=events.EMAIL_LABELED,
        data={
            "inbox": inbox_services.inbox_record(inbox),
            "email": email_event_data(inbox, email, list(labels))["email"],
            "labels": list(labels),
        },
    )


def receive_one(raw: bytes, *, to: str, mail_from: str = "") -> Receipt:
    """Convenience for one recipient (internal delivery, tests)."""
    return receive(raw, mail_from=mail_from, rcpt_tos=[to])[0]

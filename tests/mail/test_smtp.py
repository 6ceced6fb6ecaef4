"""Real mail through the real SMTP front door (smtplib → aiosmtpd → pipeline → PostgreSQL)."""

from __future__ import annotations

import hashlib
import smtplib
from datetime import timedelta

import pytest
import time_machine
from django.utils import timezone

from apikeys.models import Workspace
from events.models import Event
from inboxes import services as inbox_services
from inboxes.models import Inbox
from mail import selectors
from mail.models import Attachment, Email, RawMessage
from tests.conftest import Api, SmtpServer
from tests.dns_server import verified_domain
from tests.mail.messages import PDF, PNG, message


@pytest.fixture
def inbox(workspace: Workspace) -> Inbox:
    return inbox_services.inbox_create(workspace=workspace, local_part="agent")


def _only_email(inbox: Inbox) -> Email:
    emails = list(Email.objects.filter(inbox=inbox))
    assert len(emails) == 1, emails
    return emails[0]


def test_plain_message_is_stored_with_raw_bytes(smtp_server: SmtpServer, inbox: Inbox) -> None:
    raw = message(
        to=inbox.address,
        sender_name="Acme Accounts",
        subject="Your verification code is 482913",
        text="Hi,\n\nYour verification code is 482913.\n\nVisit https://acme.example/verify?t=abc to confirm.\n",
    )
    assert smtp_server.send(raw, to=[inbox.address], mail_from="bounce@acme.example") == {}
    email = _only_email(inbox)
    assert email.from_address == "noreply@service.example" and email.from_name == "Acme Accounts"
    assert email.envelope_from == "bounce@acme.example"
    assert email.subject == "Your verification code is 482913"
    assert email.to == [{"address": inbox.address, "name": ""}]
    assert email.text.startswith("Hi,\n\nYour verification code is 482913.")
    assert email.preview.startswith("Hi, Your verification code is 482913. Visit")
    assert email.extracted["code"] == "482913"
    assert email.extracted["link"] == "https://acme.example/verify?t=abc"
    assert email.size == len(raw)
    stored = RawMessage.objects.get(email=email)
    assert bytes(stored.content) == raw
    assert stored.sha256 == hashlib.sha256(raw).hexdigest()
    inbox.refresh_from_db()
    assert inbox.email_count == 1 and inbox.unread_count == 1 and inbox.last_email_at
    event = Event.objects.get(type="email.received", inbox_id=inbox.pk)
    assert event.data["email"]["id"] == email.pk
    assert event.data["email"]["verification"] == {
        "code": "482913",
        "link": "https://acme.example/verify?t=abc",
    }


def test_multipart_alternative_with_attachments_and_inline_image(
    smtp_server: SmtpServer, inbox: Inbox
) -> None:
    raw = message(
        to=inbox.address,
        subject="Invoice",
        text="See attached.",
        html='<p>See <b>attached</b>.</p><img src="cid:logo1">',
        inline_png="logo1",
        attachments=[
            ("invoice 2026.pdf", "application/pdf", PDF),
            ("notes.txt", "text/plain", b"n"),
        ],
    )
    smtp_server.send(raw, to=[inbox.address])
    email = _only_email(inbox)
    assert email.text.strip() == "See attached."
    assert "<b>attached</b>" in email.html
    assert email.has_attachments
    parts = {a.filename or a.content_id: a for a in Attachment.objects.filter(email=email)}
    workspace = inbox.workspace
    assert selectors.attachment_content(workspace, parts["invoice 2026.pdf"]) == PDF
    assert parts["invoice 2026.pdf"].content_type == "application/pdf"
    assert parts["invoice 2026.pdf"].size == len(PDF) and not parts["invoice 2026.pdf"].inline
    inline = next(a for a in parts.values() if a.content_id == "logo1")
    assert inline.inline and inline.content_type == "image/png"
    assert selectors.attachment_content(workspace, inline) == PNG


@pytest.mark.parametrize("cte", ["8bit", "quoted-printable", "base64"])
def test_transfer_encodings_and_encoded_words(
    smtp_server: SmtpServer, inbox: Inbox, cte: str
) -> None:
    text = "Grüße aus Köln — 你好 — код 7731\n"
    raw = message(
        to=inbox.address,
        sender_name="Jürgen Müller",
        subject="Bestätigung für Ihr Konto ✓",
        text=text,
        cte=cte,
    )
    assert b"=?utf-8?" in raw.lower()  # encoded words on the wire
    with smtp_server.client() as smtp:
        smtp.sendmail(
            "sender@example.org",
            [inbox.address],
            raw,
            mail_options=["SMTPUTF8"] if cte == "8bit" else [],
        )
    email = _only_email(inbox)
    assert email.subject == "Bestätigung für Ihr Konto ✓"
    assert email.from_name == "Jürgen Müller"
    assert email.text == text


def test_latin1_quoted_printable_body(smtp_server: SmtpServer, inbox: Inbox) -> None:
    raw = (
        b"From: =?ISO-8859-1?Q?Fran=E7ois?= <f@example.fr>\r\n"
        b"To: " + inbox.address.encode() + b"\r\n"
        b"Subject: =?ISO-8859-1?Q?R=E9initialisation?=\r\n"
        b"MIME-Version: 1.0\r\n"
        b"Content-Type: text/plain; charset=ISO-8859-1\r\n"
        b"Content-Transfer-Encoding: quoted-printable\r\n\r\n"
        b"Votre code de v=E9rification est 551203.\r\n"
    )
    smtp_server.send(raw, to=[inbox.address])
    email = _only_email(inbox)
    assert email.from_name == "François" and email.subject == "Réinitialisation"
    assert email.text.strip() == "Votre code de vérification est 551203."
    assert email.extracted["code"] == "551203"


def test_several_recipients_each_get_a_copy(
    smtp_server: SmtpServer, workspace: Workspace, other_workspace: Workspace
) -> None:
    a = inbox_services.inbox_create(workspace=workspace, local_part="a")
    b = inbox_services.inbox_create(workspace=other_workspace, local_part="b")
    raw = message(to=[a.address, b.address], subject="Both")
    refused = smtp_server.send(raw, to=[a.address, b.address, "nobody@pigeonhole.test"])
    assert (
        list(refused) == ["nobody@pigeonhole.test"] and refused["nobody@pigeonhole.test"][0] == 550
    )
    ea, eb = _only_email(a), _only_email(b)
    assert ea.pk != eb.pk and ea.workspace_id != eb.workspace_id
    assert bytes(ea.raw.content) == bytes(eb.raw.content) == raw


def test_plus_addressing(smtp_server: SmtpServer, inbox: Inbox) -> None:
    smtp_server.send(message(to=inbox.address), to=["Agent+signup-42@Pigeonhole.test"])
    email = _only_email(inbox)
    assert email.envelope_to == "Agent+signup-42@Pigeonhole.test"


def test_unknown_recipient_refused_at_rcpt(smtp_server: SmtpServer, inbox: Inbox) -> None:
    with smtp_server.client() as smtp:
        smtp.ehlo()
        smtp.mail("x@example.org")
        code, reply = smtp.rcpt("ghost@pigeonhole.test")
        assert (code, reply[:5]) == (550, b"5.1.1")
        code, _ = smtp.rcpt("someone@not-hosted.example")
        assert code == 550
    assert Email.objects.count() == 0


def test_unparsable_paths_are_malformed_addresses(smtp_server: SmtpServer, inbox: Inbox) -> None:
    """``<@`` crashes the stdlib address parser: a 553 for it, never a 500, and the session
    goes on to deliver."""
    with smtp_server.client() as smtp:
        smtp.ehlo()
        code, reply = smtp.docmd("MAIL", "FROM:<@")
        assert code == 553, reply
        smtp.mail("x@example.org")
        code, reply = smtp.docmd("RCPT", 'TO:<"')
        assert code == 553, reply
        smtp.rcpt(inbox.address)
        smtp.data(message(to=inbox.address))
    assert Email.objects.filter(inbox=inbox).count() == 1


def test_expired_inbox_refused_and_event(smtp_server: SmtpServer, workspace: Workspace) -> None:
    inbox = inbox_services.inbox_create(workspace=workspace, local_part="old", ttl_minutes=1)
    later = time_machine.travel(timezone.now() + timedelta(minutes=2), tick=True)
    with later, pytest.raises(smtplib.SMTPRecipientsRefused) as refused:
        smtp_server.send(message(to=inbox.address), to=[inbox.address])
    code, reply = refused.value.recipients[inbox.address]
    assert (code, reply[:5]) == (550, b"5.1.1")
    assert Email.objects.count() == 0
    rejected = Event.objects.get(type="mail.rejected", inbox_id=inbox.pk)
    assert rejected.data["from"] == "sender@example.org"


@pytest.mark.parametrize(
    ("allow", "block", "sender", "accepted"),
    [
        ([], ["spam.example"], "a@spam.example", False),
        ([], ["spam.example"], "a@mail.spam.example", False),
        ([], ["@spam.example"], "a@notspam.example", True),
        (["good.example"], [], "a@good.example", True),
        (["good.example"], [], "a@bad.example", False),
        (["Boss@Good.example"], [], "boss@good.example", True),
        (["boss@good.example"], [], "intern@good.example", False),
        (["good.example"], ["intern@good.example"], "intern@good.example", False),
    ],
)
def test_sender_filters(
    smtp_server: SmtpServer,
    workspace: Workspace,
    allow: list[str],
    block: list[str],
    sender: str,
    accepted: bool,
) -> None:
    inbox = inbox_services.inbox_create(
        workspace=workspace, local_part="filtered", allow_senders=allow, block_senders=block
    )
    raw = message(to=inbox.address, sender=sender)
    if accepted:
        smtp_server.send(raw, to=[inbox.address], mail_from="envelope@elsewhere.example")
        assert Email.objects.filter(inbox=inbox).count() == 1
    else:
        with pytest.raises(smtplib.SMTPDataError) as refused:
            smtp_server.send(raw, to=[inbox.address], mail_from="envelope@elsewhere.example")
        assert refused.value.smtp_code == 550 and refused.value.smtp_error[:5] == b"5.7.1"
        assert Email.objects.filter(inbox=inbox).count() == 0
        assert Event.objects.get(type="mail.rejected", inbox_id=inbox.pk).data["from"] == sender


def test_envelope_sender_used_without_from_header(
    smtp_server: SmtpServer, workspace: Workspace
) -> None:
    inbox = inbox_services.inbox_create(
        workspace=workspace, local_part="nofrom", block_senders=["blocked.example"]
    )
    raw = b"To: " + inbox.address.encode() + b"\r\nSubject: no from\r\n\r\nbody\r\n"
    with pytest.raises(smtplib.SMTPDataError):
        smtp_server.send(raw, to=[inbox.address], mail_from="x@blocked.example")
    smtp_server.send(raw, to=[inbox.address], mail_from="x@fine.example")
    assert _only_email(inbox).from_address == ""


def test_cap_with_reject(smtp_server: SmtpServer, workspace: Workspace) -> None:
    inbox = inbox_services.inbox_create(
        workspace=workspace, local_part="capped", max_emails=2, overflow="reject"
    )
    for i in range(2):
        smtp_server.send(message(to=inbox.address, subject=f"m{i}"), to=[inbox.address])
    with pytest.raises(smtplib.SMTPDataError) as refused:
        smtp_server.send(message(to=inbox.address, subject="m2"), to=[inbox.address])
    assert refused.value.smtp_code == 552 and refused.value.smtp_error[:5] == b"5.2.2"
    assert sorted(Email.objects.filter(inbox=inbox).values_list("subject", flat=True)) == [
        "m0",
        "m1",
    ]
    assert Event.objects.filter(type="mail.rejected", inbox_id=inbox.pk).count() == 1


def test_cap_with_drop_oldest(smtp_server: SmtpServer, workspace: Workspace) -> None:
    inbox = inbox_services.inbox_create(
        workspace=workspace, local_part="rolling", max_emails=2, overflow="drop_oldest"
    )
    for i in range(4):
        smtp_server.send(message(to=inbox.address, subject=f"m{i}"), to=[inbox.address])
    assert sorted(Email.objects.filter(inbox=inbox).values_list("subject", flat=True)) == [
        "m2",
        "m3",
    ]
    inbox.refresh_from_db()
    assert inbox.email_count == 2 and inbox.unread_count == 2
    assert RawMessage.objects.filter(email__inbox=inbox).count() == 2


def test_size_limit(settings, smtp_server: SmtpServer, inbox: Inbox) -> None:  # type: ignore[no-untyped-def]
    settings.MAX_MESSAGE_BYTES = 2000
    with smtp_server.client() as smtp:
        smtp.ehlo()
        assert smtp.has_extn("size") and smtp.esmtp_features["size"] == "2000"
    with pytest.raises((smtplib.SMTPDataError, smtplib.SMTPSenderRefused)) as refused:
        smtp_server.send(message(to=inbox.address, text="x" * 5000), to=[inbox.address])
    assert refused.value.smtp_code == 552
    assert refused.value.smtp_error[:5] == b"5.3.4"
    assert Email.objects.count() == 0


def test_size_limit_discovered_in_data(settings, smtp_server: SmtpServer, inbox: Inbox) -> None:  # type: ignore[no-untyped-def]
    settings.MAX_MESSAGE_BYTES = 2000
    with smtp_server.client() as smtp:
        smtp.ehlo()
        smtp.mail("x@example.org")  # no SIZE parameter: the limit is found while reading
        smtp.rcpt(inbox.address)
        code, reply = smtp.data(message(to=inbox.address, text="y" * 5000))
    assert (code, reply[:5]) == (552, b"5.3.4")
    assert Email.objects.count() == 0
    assert Event.objects.filter(type="mail.rejected", inbox_id=inbox.pk).count() == 1


def test_catch_all_domain_creates_the_inbox(smtp_server: SmtpServer, workspace: Workspace) -> None:
    verified_domain(workspace, "catch.test", catch_all=True)
    smtp_server.send(message(to="new-user@catch.test"), to=["New-User+x@catch.test"])
    inbox = Inbox.objects.get(address="new-user@catch.test")
    assert inbox.workspace_id == workspace.pk and inbox.source == "catch_all"
    assert Email.objects.filter(inbox=inbox).count() == 1
    created = Event.objects.get(type="inbox.created", inbox_id=inbox.pk)
    assert created.data["source"] == "catch_all"


def test_malformed_message_is_stored_with_raw_bytes(smtp_server: SmtpServer, inbox: Inbox) -> None:
    raw = (
        b"From: broken <<<@@>\r\nSubject: =?x-unknown?B?////?=\r\n"
        b'Content-Type: multipart/mixed; boundary="nope"\r\n\r\n'
        b"--nope\r\nContent-Type: text/plain; charset=x-klingon\r\n"
        b"Content-Transfer-Encoding: base64\r\n\r\n@@@not base64\r\n"
    )
    smtp_server.send(raw, to=[inbox.address])
    email = _only_email(inbox)
    assert bytes(email.raw.content) == raw
    assert email.defects


def test_message_readable_through_the_api(smtp_server: SmtpServer, inbox: Inbox, api: Api) -> None:
    raw = message(
        to=inbox.address,
        subject="Report",
        attachments=[
            ("r\u00e9sum\u00e9 2026.pdf", "application/pdf", PDF),
            ("../../etc/passwd", "text/plain", b"root"),
        ],
    )
    smtp_server.send(raw, to=[inbox.address])
    listed = api.call("GET", f"inboxes/{inbox.address}/emails").json()["data"]
    email = api.call("GET", f"emails/{listed[0]['id']}").json()
    attachment, traversal = email["attachments"]
    assert attachment["filename"] == "r\u00e9sum\u00e9 2026.pdf"
    assert "/" not in traversal["filename"] and ".." not in traversal["filename"]
    download = api.get(f"/api/v1/emails/{email['id']}/attachments/{attachment['id']}")
    assert download.status_code == 200 and download["Content-Type"] == "application/pdf"
    assert b"".join(download.streaming_content if download.streaming else [download.content]) == PDF
    assert download["Content-Disposition"].startswith("attachment;")
    assert "filename*=utf-8''" in download["Content-Disposition"]
    raw_download = api.get(f"/api/v1/emails/{email['id']}/raw")
    assert raw_download["Content-Type"] == "message/rfc822" and raw_download.content == raw


def test_interleaved_sessions_keep_their_own_envelopes(
    smtp_server: SmtpServer, workspace: Workspace
) -> None:
    """Sessions share the state aiosmtpd computes once per process, never each other's: three
    open sessions, commands interleaved, each message reaches its own inbox from its sender."""
    inboxes = [
        inbox_services.inbox_create(workspace=workspace, local_part=f"i{n}") for n in range(3)
    ]
    clients = [smtp_server.client() for _ in inboxes]
    for client in clients:
        assert client.ehlo()[0] == 250
    for n, client in enumerate(clients):
        assert client.mail(f"sender{n}@example.org")[0] == 250
    for client, inbox in zip(reversed(clients), reversed(inboxes), strict=True):
        assert client.rcpt(inbox.address)[0] == 250
    for n, (client, inbox) in enumerate(zip(clients, inboxes, strict=True)):
        raw = message(to=inbox.address, subject=f"session {n}", text=f"body {n}\n")
        assert client.data(raw)[0] == 250
        client.quit()
    for n, inbox in enumerate(inboxes):
        email = _only_email(inbox)
        assert (email.subject, email.envelope_from) == (f"session {n}", f"sender{n}@example.org")

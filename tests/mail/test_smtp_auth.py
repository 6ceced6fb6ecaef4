"""SMTP AUTH with an inbox's sandbox credentials, over real connections with ``smtplib`` and
``aiosmtplib``: mail to any recipients is captured once into the credential's inbox with every
envelope recipient recorded; AUTH over TLS only unless plaintext is allowed; wrong credentials
535 and the failure limits per IP and per username; revocation refuses at once, an open session
included; unauthenticated sessions as before. The credentials come from the REST API."""

from __future__ import annotations

import asyncio
import base64
import smtplib
import ssl
from collections.abc import Iterator
from pathlib import Path

import aiosmtplib
import pytest
from django.test import override_settings

from apikeys.models import AuditEntry, Workspace
from inboxes import services as inbox_services
from inboxes.models import Inbox
from mail.models import Email
from mail.smtpd import tls
from tests.conftest import Api, SmtpServer
from tests.mail.messages import message
from tests.mail.test_smtp_tls import TlsSmtpServer, make_certificate, trusting

RECIPIENTS = ["ann@customer.example", "bob@other.example", "carol@third.example"]


@pytest.fixture(autouse=True)
def _fresh_failure_counts() -> Iterator[None]:
    """The failure counts are per IP and username across tests: start each test clean (Redis is
    this run's own database, given by REDIS_URL)."""
    from django.conf import settings

    def clear() -> None:
        if settings.REDIS_URL:
            import redis

            client = redis.Redis.from_url(settings.REDIS_URL)
            keys = list(client.scan_iter("pgh:smtpauth:*"))
            if keys:
                client.delete(*keys)

    clear()
    yield
    clear()


@pytest.fixture
def certificate(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    cert, key = make_certificate(tmp_path / "configured")
    with override_settings(
        SMTP_TLS_CERT=str(cert), SMTP_TLS_KEY=str(key), SMTP_AUTH_ALLOW_PLAINTEXT=False
    ):
        yield cert, key


def _stop(server: TlsSmtpServer | SmtpServer) -> None:
    server.stop()
    from django.db import connections

    connections.close_all()


@pytest.fixture
def tls_server(transactional_db: None, certificate: tuple[Path, Path]) -> Iterator[TlsSmtpServer]:
    """STARTTLS on ``port``, implicit TLS on ``smtps_port``; plaintext AUTH not allowed."""
    context = tls.configured_context()
    assert context is not None
    server = TlsSmtpServer(context)
    yield server
    _stop(server)


@pytest.fixture
def plain_server(transactional_db: None) -> Iterator[SmtpServer]:
    """No TLS at all, plaintext AUTH not allowed (production without a certificate)."""
    with override_settings(SMTP_AUTH_ALLOW_PLAINTEXT=False):
        server = SmtpServer()
    yield server
    _stop(server)


@pytest.fixture
def dev_server(transactional_db: None) -> Iterator[SmtpServer]:
    """No TLS, plaintext AUTH allowed (embedded mode's default)."""
    with override_settings(SMTP_AUTH_ALLOW_PLAINTEXT=True):
        server = SmtpServer()
    yield server
    _stop(server)


@pytest.fixture
def inbox(workspace: Workspace) -> Inbox:
    return inbox_services.inbox_create(workspace=workspace, local_part="sandbox")


def credential(api: Api, inbox: Inbox, name: str = "app") -> dict:
    response = api.call("POST", f"inboxes/{inbox.pk}/smtp-credentials", {"name": name})
    assert response.status_code == 200, response.content
    return response.json()


def _client_context(cert: Path) -> ssl.SSLContext:
    return trusting(cert)


def _emails(inbox: Inbox) -> list[Email]:
    return list(Email.objects.filter(inbox=inbox).order_by("id"))


# --- capture --------------------------------------------------------------------------------------


def test_starttls_auth_captures_three_external_recipients_once_smtplib(
    tls_server: TlsSmtpServer, certificate: tuple[Path, Path], api: Api, inbox: Inbox
) -> None:
    cert, _ = certificate
    login = credential(api, inbox)
    with smtplib.SMTP("localhost", tls_server.port, timeout=30) as smtp:
        smtp.ehlo()
        assert not smtp.has_extn("auth")  # not in plain text
        smtp.starttls(context=_client_context(cert))
        smtp.ehlo()
        assert set(smtp.esmtp_features["auth"].split()) == {"LOGIN", "PLAIN"}
        code, _ = smtp.login(login["username"], login["password"])
        assert code == 235
        refused = smtp.sendmail(
            "app@myapp.example", RECIPIENTS, message(to=RECIPIENTS, subject="welcome")
        )
        assert refused == {}
    [email] = _emails(inbox)
    assert email.subject == "welcome"
    assert email.envelope_from == "app@myapp.example"
    assert email.envelope_recipients == RECIPIENTS
    assert email.envelope_to == RECIPIENTS[0]
    # The API shows it, with every recipient.
    listed = api.call("GET", f"inboxes/{inbox.pk}/emails").json()["data"]
    assert [row["id"] for row in listed] == [email.pk]
    record = api.call("GET", f"emails/{email.pk}").json()
    assert record["envelope_recipients"] == RECIPIENTS
    assert record["inbox_id"] == inbox.pk
    # The pipeline's counters and events, as for any mail.
    inbox.refresh_from_db()
    assert inbox.email_count == 1
    from events.models import Event

    types = list(Event.objects.filter(inbox_id=inbox.pk).values_list("type", flat=True))
    assert "email.received" in types


def test_implicit_tls_auth_login_and_plain_aiosmtplib(
    tls_server: TlsSmtpServer, certificate: tuple[Path, Path], api: Api, inbox: Inbox
) -> None:
    cert, _ = certificate
    login = credential(api, inbox)
    assert tls_server.smtps_port is not None

    async def send(mechanism: str, subject: str) -> None:
        smtp = aiosmtplib.SMTP(
            hostname="localhost",
            port=tls_server.smtps_port,
            use_tls=True,
            tls_context=_client_context(cert),
            timeout=30,
        )
        await smtp.connect()
        await smtp.ehlo()
        assert smtp.supports_extension("auth")
        auth = smtp.auth_login if mechanism == "LOGIN" else smtp.auth_plain
        response = await auth(login["username"], login["password"])
        assert response.code == 235
        errors, _ = await smtp.sendmail(
            "app@myapp.example", RECIPIENTS, message(to=RECIPIENTS, subject=subject)
        )
        assert errors == {}
        await smtp.quit()

    asyncio.run(send("LOGIN", "by login"))
    asyncio.run(send("PLAIN", "by plain"))
    emails = _emails(inbox)
    assert [e.subject for e in emails] == ["by login", "by plain"]
    assert all(e.envelope_recipients == RECIPIENTS for e in emails)


def test_starttls_auth_aiosmtplib(
    tls_server: TlsSmtpServer, certificate: tuple[Path, Path], api: Api, inbox: Inbox
) -> None:
    cert, _ = certificate
    login = credential(api, inbox)

    async def send() -> None:
        smtp = aiosmtplib.SMTP(
            hostname="localhost",
            port=tls_server.port,
            start_tls=False,
            tls_context=_client_context(cert),
            timeout=30,
        )
        await smtp.connect()
        await smtp.ehlo()
        assert not smtp.supports_extension("auth")
        with pytest.raises(aiosmtplib.SMTPAuthenticationError) as refused:
            await smtp.auth_plain(login["username"], login["password"])
        assert refused.value.code == 538
        await smtp.starttls()
        await smtp.ehlo()
        await smtp.login(login["username"], login["password"])
        await smtp.sendmail("app@myapp.example", RECIPIENTS, message(to=RECIPIENTS, subject="s"))
        await smtp.quit()

    asyncio.run(send())
    [email] = _emails(inbox)
    assert email.envelope_recipients == RECIPIENTS


def test_auth_refused_in_plain_text_unless_allowed(
    plain_server: SmtpServer, api: Api, inbox: Inbox
) -> None:
    login = credential(api, inbox)
    with smtplib.SMTP("127.0.0.1", plain_server.port, timeout=30) as smtp:
        smtp.ehlo()
        assert not smtp.has_extn("auth")
        blob = base64.b64encode(f"\0{login['username']}\0{login['password']}".encode()).decode()
        code, reply = smtp.docmd("AUTH", f"PLAIN {blob}")
        assert (code, reply[:6]) == (538, b"5.7.11")
        # Unauthenticated: an external recipient is refused, as always.
        code, _ = smtp.mail("app@myapp.example")
        assert code == 250
        code, _ = smtp.rcpt(RECIPIENTS[0])
        assert code == 550
    assert _emails(inbox) == []


def test_plaintext_auth_when_allowed_and_unauthenticated_mail_unchanged(
    dev_server: SmtpServer, api: Api, inbox: Inbox
) -> None:
    login = credential(api, inbox)
    with smtplib.SMTP("127.0.0.1", dev_server.port, timeout=30) as smtp:
        smtp.ehlo()
        assert smtp.has_extn("auth")
        smtp.login(login["username"], login["password"])
        smtp.sendmail("a@myapp.example", RECIPIENTS[:2], message(to=RECIPIENTS[:2], subject="dev"))
    # Without AUTH: only hosted addresses, each copy recording the recipients it was stored for.
    with smtplib.SMTP("127.0.0.1", dev_server.port, timeout=30) as smtp:
        tagged = inbox.address.replace("@", "+x@")
        refused = smtp.sendmail(
            "a@myapp.example",
            [inbox.address, tagged, RECIPIENTS[0]],
            message(to=inbox.address, subject="plain"),
        )
        assert list(refused) == [RECIPIENTS[0]]
    by_subject = {e.subject: e for e in _emails(inbox)}
    assert by_subject["dev"].envelope_recipients == RECIPIENTS[:2]
    assert by_subject["plain"].envelope_recipients == [inbox.address, tagged]


# --- refusals ---------------------------------------------------------------------------------------


def _auth_plain(smtp: smtplib.SMTP, username: str, password: str) -> tuple[int, bytes]:
    blob = base64.b64encode(f"\0{username}\0{password}".encode()).decode()
    return smtp.docmd("AUTH", f"PLAIN {blob}")


def _session(server: TlsSmtpServer, cert: Path, source: str = "127.0.0.1") -> smtplib.SMTP:
    smtp = smtplib.SMTP("localhost", server.port, timeout=30, source_address=(source, 0))
    smtp.starttls(context=_client_context(cert))
    smtp.ehlo()
    return smtp


def test_wrong_password_535_and_the_failure_limits(
    tls_server: TlsSmtpServer, certificate: tuple[Path, Path], api: Api, inbox: Inbox
) -> None:
    cert, _ = certificate
    first, second = credential(api, inbox, "one"), credential(api, inbox, "two")
    wrong = second["password"]  # well formed, but another credential's
    with override_settings(SMTP_AUTH_FAILURE_LIMIT=3):
        # Per username: three failures from one address lock the name out from any address.
        with _session(tls_server, cert, "127.0.0.2") as smtp:
            for _ in range(3):
                code, reply = _auth_plain(smtp, first["username"], wrong)
                assert (code, reply[:5]) == (535, b"5.7.8")
            code, _ = _auth_plain(smtp, first["username"], first["password"])
            assert code == 454
        with _session(tls_server, cert, "127.0.0.3") as smtp:
            code, reply = _auth_plain(smtp, first["username"], first["password"])
            assert (code, reply[:5]) == (454, b"4.7.0")
            # That address has no failures: another username still works from it.
            code, _ = _auth_plain(smtp, second["username"], second["password"])
            assert code == 235
        # Per IP: three failures with any names lock the address out, right credentials too.
        with _session(tls_server, cert, "127.0.0.4") as smtp:
            for name in ("nobody-1", "nobody-2", "nobody-3"):
                code, _ = _auth_plain(smtp, name, wrong)
                assert code == 535
            code, _ = _auth_plain(smtp, second["username"], second["password"])
            assert code == 454
        with _session(tls_server, cert, "127.0.0.5") as smtp:  # another address is not
            assert _auth_plain(smtp, second["username"], second["password"])[0] == 235


def test_a_malformed_or_aborted_dialogue_gets_one_reply(
    tls_server: TlsSmtpServer, certificate: tuple[Path, Path], api: Api, inbox: Inbox
) -> None:
    cert, _ = certificate
    login = credential(api, inbox)
    with _session(tls_server, cert) as smtp:
        assert smtp.docmd("AUTH", "CRAM-MD5")[0] == 504
        assert smtp.docmd("AUTH", "PLAIN not-base64!")[0] == 501
        assert smtp.docmd("AUTH", "LOGIN")[0] == 334  # Username:
        assert smtp.docmd("*")[0] == 501  # aborted: one reply, the session goes on
        assert smtp.noop()[0] == 250
        assert smtp.mail("a@myapp.example")[0] == 250
        assert _auth_plain(smtp, login["username"], login["password"])[0] == 503  # mid-mail
        smtp.rset()
        assert _auth_plain(smtp, login["username"], login["password"])[0] == 235
        assert _auth_plain(smtp, login["username"], login["password"])[0] == 503  # once


def test_revoked_credentials_are_refused_at_once(
    tls_server: TlsSmtpServer, certificate: tuple[Path, Path], api: Api, inbox: Inbox
) -> None:
    cert, _ = certificate
    login = credential(api, inbox)
    with _session(tls_server, cert) as open_session:
        assert _auth_plain(open_session, login["username"], login["password"])[0] == 235
        with _session(tls_server, cert) as smtp:  # the receiver has seen it succeed
            assert _auth_plain(smtp, login["username"], login["password"])[0] == 235
        response = api.call("DELETE", f"inboxes/{inbox.pk}/smtp-credentials/{login['id']}")
        assert response.status_code == 200
        with _session(tls_server, cert) as smtp:
            assert _auth_plain(smtp, login["username"], login["password"])[0] == 535
        # The session that authenticated before: its next message is refused, not stored.
        with pytest.raises(smtplib.SMTPDataError) as refused:
            open_session.sendmail("a@myapp.example", RECIPIENTS, message(to=RECIPIENTS))
        assert refused.value.smtp_code == 550
        assert refused.value.smtp_error[:5] == b"5.7.8"
    assert _emails(inbox) == []


def test_smtp_faults_of_the_credentials_inbox_apply(
    tls_server: TlsSmtpServer, certificate: tuple[Path, Path], api: Api, inbox: Inbox
) -> None:
    cert, _ = certificate
    rule = {"stage": "rcpt", "reply": "451 4.7.1 Try again later", "mode": "first", "count": 1}
    response = api.call("PATCH", f"inboxes/{inbox.pk}", {"smtp_faults": [rule]})
    assert response.status_code == 200, response.content
    login = credential(api, inbox)
    with _session(tls_server, cert) as smtp:
        smtp.login(login["username"], login["password"])
        smtp.mail("a@myapp.example")
        assert smtp.rcpt(RECIPIENTS[0])[0] == 451  # the first attempt
        assert smtp.rcpt(RECIPIENTS[1])[0] == 250
        smtp.rset()
        smtp.sendmail("a@myapp.example", RECIPIENTS, message(to=RECIPIENTS, subject="after"))
    inbox.refresh_from_db()
    assert inbox.injected_faults == 1
    [email] = _emails(inbox)
    assert email.envelope_recipients == RECIPIENTS


def test_credentials_audit_entries(api: Api, inbox: Inbox) -> None:
    login = credential(api, inbox)
    api.call("DELETE", f"inboxes/{inbox.pk}/smtp-credentials/{login['id']}")
    rows = list(
        AuditEntry.objects.filter(workspace_id=inbox.workspace_id, target_id=login["id"])
        .order_by("id")
        .values_list("action", "actor_type", "target_name", "changes")
    )
    assert [r[:3] for r in rows] == [
        ("smtp_credential.created", "key", login["username"]),
        ("smtp_credential.revoked", "key", login["username"]),
    ]
    assert rows[0][3]["inbox"] == {"after": inbox.address}
    assert login["password"] not in str(rows)


def test_the_failure_limit_ends_with_its_window() -> None:
    """The counts of this run's store (Redis with REDIS_URL, else the process's memory): at the
    limit an IP and a username are refused; once the window has passed, neither is."""
    from mail.smtpd.auth import AuthFailures

    async def run() -> tuple[bool, bool, bool, bool]:
        failures = AuthFailures()
        with override_settings(SMTP_AUTH_FAILURE_LIMIT=2, SMTP_AUTH_FAILURE_WINDOW=1):
            before = await failures.limited("127.0.0.9", "window-user")
            await failures.failed("127.0.0.9", "window-user")
            once = await failures.limited("127.0.0.9", "someone-else")
            await failures.failed("127.0.0.9", "window-user")
            at_limit = await failures.limited("127.0.0.10", "WINDOW-USER")  # the name, any case
            for _ in range(100):  # the window is 1 s; wait for it to pass, at most 10 s
                if not await failures.limited("127.0.0.9", "window-user"):
                    return before, once, at_limit, True
                await asyncio.sleep(0.1)
            return before, once, at_limit, False

    assert asyncio.run(run()) == (False, False, True, True)

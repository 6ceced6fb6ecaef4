"""Sandbox SMTP credentials end to end: the SMTP receiver and the web app as separate processes
(the smtpd's batches written by its writer process on PostgreSQL), the credential made through
the live API, a wait parked before the mail is sent with AUTH to three external recipients, and
the email as the wait and the list answer it: one copy, all three recipients."""

from __future__ import annotations

import smtplib
import time
from collections.abc import Iterator

import pytest

from apikeys import services as key_services
from apikeys.audit import Actor
from apikeys.models import Workspace
from inboxes import services as inbox_services
from inboxes.models import Inbox
from tests.live import Stack
from tests.mail.messages import message
from tests.mail.test_realtime import Waiter, parked_since

RECIPIENTS = ["ann@customer.example", "bob@other.example", "carol@third.example"]


@pytest.fixture(scope="module")
def stack(django_db_setup: None, django_db_blocker) -> Iterator[Stack]:  # type: ignore[no-untyped-def]
    from django.db import connection

    running = Stack(connection.settings_dict["NAME"])
    # No certificate here: AUTH in plain text, as embedded mode allows it (the TLS paths have
    # their own tests in test_smtp_auth.py).
    for process in (running.web, running.smtp):
        process.env["SMTP_AUTH_ALLOW_PLAINTEXT"] = "true"
    running.start()
    yield running
    running.stop()


@pytest.fixture
def setup(transactional_db: None, workspace: Workspace) -> tuple[Inbox, str]:
    inbox = inbox_services.inbox_create(workspace=workspace, local_part="captured")
    key = key_services.api_key_create(
        workspace=workspace, name="live", scopes=["read", "write"], by=Actor.system("tests")
    ).plain
    return inbox, key


def test_authenticated_mail_to_three_recipients_reaches_a_wait_and_the_list(
    stack: Stack, setup: tuple[Inbox, str]
) -> None:
    inbox, key = setup
    with stack.client(key) as client:
        created = client.post(f"inboxes/{inbox.pk}/smtp-credentials", json={"name": "live"})
        assert created.status_code == 200, created.text
        login = created.json()
        assert login["smtp"]["plaintext_auth"] is True
        waiter = Waiter(
            client, f"inboxes/{inbox.pk}/wait", {"timeout": 60, "since": parked_since()}
        )
        since = parked_since()
        # Waits for the second and third recipients, parked before the mail is sent: the wait's
        # `to` filter looks at every envelope recipient (woken by the sieve's recipient lookup).
        by_bob = Waiter(
            client, f"inboxes/{inbox.pk}/wait", {"timeout": 60, "since": since, "to": RECIPIENTS[1]}
        )
        by_carol = Waiter(
            client, "emails/wait", {"timeout": 60, "since": since, "to": RECIPIENTS[2]}
        )
        for parked in (waiter, by_bob, by_carol):
            parked.start()
        time.sleep(1)  # parked (and if not yet, `since` still finds the mail)
        with smtplib.SMTP("127.0.0.1", stack.smtp_port, timeout=30) as smtp:
            smtp.login(login["username"], login["password"])
            refused = smtp.sendmail(
                "app@myapp.example", RECIPIENTS, message(to=RECIPIENTS, subject="order 1234")
            )
            assert refused == {}
        waiter.join(90)
        assert waiter.response is not None and waiter.response.status_code == 200
        email = waiter.response.json()
        assert email["subject"] == "order 1234"
        assert email["envelope_recipients"] == RECIPIENTS
        assert email["inbox_id"] == inbox.pk
        for parked in (by_bob, by_carol):
            parked.join(90)
            assert parked.response is not None and parked.response.status_code == 200
        assert by_bob.response.json()["id"] == email["id"]
        assert [e["id"] for e in by_carol.response.json()["data"]] == [email["id"]]
        # And from the stored mail: a wait after the fact, and the `to:` search operator.
        stored = client.get(
            f"inboxes/{inbox.pk}/wait", params={"timeout": 0, "since": since, "to": RECIPIENTS[2]}
        )
        assert stored.status_code == 200 and stored.json()["id"] == email["id"]
        nobody = client.get(
            f"inboxes/{inbox.pk}/wait",
            params={"timeout": 0, "since": since, "to": "dave@customer.example"},
        )
        assert nobody.status_code == 204
        found = client.get("emails", params={"q": "to:bob@other.example"}).json()["data"]
        assert [row["id"] for row in found] == [email["id"]]
        listed = client.get(f"inboxes/{inbox.pk}/emails").json()["data"]
        assert [row["id"] for row in listed] == [email["id"]]
        # Used: the list says when, still without the password.
        [row] = client.get(f"inboxes/{inbox.pk}/smtp-credentials").json()["data"]
        assert row["last_used_at"] is not None and "password" not in row

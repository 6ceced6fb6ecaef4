"""What a client names in a request resolves as a user would expect, or fails loudly (issue 25,
items 9, 10 and 13), against a live server (daphne and ``manage.py smtpd``, or ``manage.py
serve`` in embedded mode) with mail sent over SMTP:

- a ``label`` filter naming no label of the workspace is ``400 unknown_label``, not an empty
  list (item 9);
- an inbox address with a plus tag (``alpha+x@…``) names the inbox its mail lands in, on every
  operation that takes an inbox ``{id}`` and in ``GET /emails?inbox=`` (item 10);
- a choice error lists the choices, in a body or the query (item 13).
"""

from __future__ import annotations

import smtplib
from collections.abc import Iterator
from datetime import UTC, datetime
from email.message import EmailMessage
from typing import Any

import httpx
import pytest

from apikeys import services as key_services
from apikeys.audit import Actor
from apikeys.models import Workspace
from tests.live import Stack, sse_events


@pytest.fixture(scope="module")
def stack(django_db_setup: None, django_db_blocker: Any) -> Iterator[Stack]:
    from django.db import connection

    running = Stack(connection.settings_dict["NAME"]).start()
    yield running
    running.stop()


@pytest.fixture
def client(stack: Stack, transactional_db: None, workspace: Workspace) -> Iterator[httpx.Client]:
    key = key_services.api_key_create(
        workspace=workspace, name="k", scopes=["admin"], by=Actor.system("tests")
    ).plain
    with stack.client(key) as client:
        yield client


@pytest.fixture
def other_client(
    stack: Stack, transactional_db: None, other_workspace: Workspace
) -> Iterator[httpx.Client]:
    key = key_services.api_key_create(
        workspace=other_workspace, name="k", scopes=["admin"], by=Actor.system("tests")
    ).plain
    with stack.client(key) as client:
        yield client


def send_mail(stack: Stack, to: str, subject: str) -> None:
    message = EmailMessage()
    message["From"] = "Sign-up <noreply@shop.example>"
    message["To"] = to
    message["Subject"] = subject
    message.set_content(f"{subject}\n")
    with smtplib.SMTP("127.0.0.1", stack.smtp_port, timeout=30) as smtp:
        smtp.send_message(message)


def received(client: httpx.Client, stack: Stack, to: str, subject: str, inbox_ref: str) -> dict:
    """Sends a mail to ``to`` and answers the email record, waited for through ``inbox_ref``."""
    since = datetime.now(UTC).isoformat()
    send_mail(stack, to, subject)
    response = client.get(f"inboxes/{inbox_ref}/wait", params={"timeout": "30", "since": since})
    assert response.status_code == 200, (response.status_code, response.text[:300])
    return response.json()


def assert_error(response: httpx.Response, status: int, code: str, path: str) -> dict:
    assert response.status_code == status, (response.status_code, response.text[:300])
    error = response.json()["error"]
    assert error["code"] == code, error
    assert [issue["path"] for issue in error.get("issues", [])] == [path], error
    return error


# --- item 9: an unknown label in a list filter --------------------------------------------------


def test_a_label_filter_naming_no_label_is_unknown_label(
    stack: Stack, client: httpx.Client, other_client: httpx.Client
) -> None:
    rules = {
        "match": "any",
        "conditions": [{"field": "subject", "op": "contains", "value": "code"}],
    }
    created = client.post("labels", json={"key": "signup", "name": "Sign-up", "rules": rules})
    assert created.status_code == 200, created.text
    inbox = client.post("inboxes", json={"local_part": "labelled"}).json()
    email = received(client, stack, inbox["address"], "Your code 482913", inbox["id"])
    assert [label["key"] for label in email["labels"]] == ["signup"]

    listed = client.get("emails", params={"label": "signup"}).json()["data"]
    assert [row["id"] for row in listed] == [email["id"]]
    listed = client.get(f"inboxes/{inbox['id']}/emails", params={"label": "signup"}).json()
    assert [row["id"] for row in listed["data"]] == [email["id"]]

    error = assert_error(
        client.get("emails", params={"label": "sigup"}), 400, "unknown_label", "label"
    )
    assert error["issues"][0]["message"] == "No label with this key."
    assert_error(
        client.get(f"inboxes/{inbox['id']}/emails", params={"label": "nope"}),
        400,
        "unknown_label",
        "label",
    )
    # Another workspace's label is no label of this one.
    other = other_client.post("labels", json={"key": "theirs", "name": "Theirs"})
    assert other.status_code == 200, other.text
    assert_error(client.get("emails", params={"label": "theirs"}), 400, "unknown_label", "label")


# --- item 10: a plus-tagged address as the inbox {id} -----------------------------------------


def test_a_plus_tagged_address_names_the_inbox_its_mail_lands_in(
    stack: Stack, client: httpx.Client, other_client: httpx.Client
) -> None:
    alpha = client.post("inboxes", json={"local_part": "alpha"}).json()
    local, domain = alpha["address"].split("@")
    tagged = f"{local}+signup@{domain}"
    shouted = f"{local.upper()}+Other@{domain.upper()}"

    # Mail to the tagged address lands in alpha; the wait through the tagged address sees it.
    email = received(client, stack, tagged, "Welcome", tagged)
    assert email["inbox_id"] == alpha["id"]

    got = client.get(f"inboxes/{tagged}")
    assert got.status_code == 200, got.text
    assert got.json()["id"] == alpha["id"]
    assert client.get(f"inboxes/{shouted}").json()["id"] == alpha["id"]

    listed = client.get(f"inboxes/{tagged}/emails").json()["data"]
    assert [row["id"] for row in listed] == [email["id"]]
    listed = client.get("emails", params={"inbox": shouted}).json()["data"]
    assert [row["id"] for row in listed] == [email["id"]]

    with client.stream(
        "GET", f"inboxes/{tagged}/stream", params={"last_event_id": "0", "timeout": "0"}
    ) as response:
        assert response.status_code == 200
        events = [event for event in sse_events(response) if event["event"] == "email.received"]
    assert [event["data"]["emailId"] for event in events] == [email["id"]]

    updated = client.patch(f"inboxes/{tagged}", json={"name": "Alpha"})
    assert updated.status_code == 200, updated.text
    assert (updated.json()["id"], updated.json()["name"]) == (alpha["id"], "Alpha")

    sent = client.post(
        f"inboxes/{tagged}/send",
        json={"to": ["someone@example.com"], "subject": "Hi", "text": "Hello"},
    )
    assert sent.status_code in (200, 202), sent.text
    assert sent.json()["inbox_id"] == alpha["id"]
    assert sent.json()["from"]["address"] == alpha["address"]

    # Another workspace gets 404 for the tagged address too, as for the plain one.
    assert other_client.get(f"inboxes/{tagged}").status_code == 404
    assert other_client.get(f"inboxes/{tagged}/emails").status_code == 404

    deleted = client.delete(f"inboxes/{tagged}")
    assert deleted.status_code == 200, deleted.text
    assert deleted.json()["deleted"] is True
    assert client.get(f"inboxes/{alpha['id']}").status_code == 404


def test_a_webhook_takes_a_plus_tagged_inbox_address(client: httpx.Client) -> None:
    alpha = client.post("inboxes", json={"local_part": "hooked"}).json()
    local, domain = alpha["address"].split("@")
    created = client.post(
        "webhooks",
        json={"url": "https://hooks.example.com/in", "inbox_ids": [f"{local}+x@{domain}"]},
    )
    assert created.status_code == 200, created.text
    assert created.json()["inbox_ids"] == [alpha["id"]]


# --- item 13: a choice error lists the choices --------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path", "body", "where", "wrong", "choices"),
    [
        (
            "POST",
            "labels",
            {"key": "green", "name": "Green", "color": "green"},
            "color",
            "green",
            "violet, sky, emerald, amber, rose, fuchsia, lime, orange, slate, cyan",
        ),
        (
            "POST",
            "webhooks",
            {"url": "https://hooks.example.com/in", "events": ["email.recieved"]},
            "events.0",
            "email.recieved",
            "email.received, email.labeled, inbox.created, inbox.expired, inbox.deleted, "
            "outbound.pending, "
            "outbound.sent, outbound.rejected, outbound.failed",
        ),
        (
            "POST",
            "keys",
            {"name": "k", "scopes": ["root"]},
            "scopes.0",
            "root",
            "read, write, send, admin",
        ),
        ("POST", "keys", {"name": "k", "kind": "robot"}, "kind", "robot", "agent, ci, personal"),
        ("POST", "inboxes", {"overflow": "drop"}, "overflow", "drop", "drop_oldest, reject"),
        (
            "GET",
            "outbox?status=done",
            None,
            "status",
            "done",
            "pending, sent, rejected, failed, expired",
        ),
    ],
)
def test_a_choice_error_lists_the_choices(
    client: httpx.Client,
    method: str,
    path: str,
    body: Any,
    where: str,
    wrong: str,
    choices: str,
) -> None:
    error = assert_error(client.request(method, path, json=body), 400, "validation_error", where)
    message = error["issues"][0]["message"]
    assert message == f'"{wrong}" is not a valid choice; choose one of: {choices}.'

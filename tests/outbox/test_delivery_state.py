"""The delivery state of outgoing mail, over HTTP against a live server and a real relay.

``status: sent`` means handed to delivery; ``delivery`` says what became of it: delivered with
the relay's reply, retrying with the next attempt's time (the relay refused the connection or
answered 4xx), failed for good on a 5xx, delivered internally, or captured (embedded mode
without ``EMAIL_URL``: kept here, never sent to the default relay, never called delivered).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any

import httpx
import pytest
import time_machine

from apikeys import services as key_services
from apikeys.audit import Actor
from apikeys.models import Workspace
from inboxes import services as inbox_services
from inboxes.models import Inbox
from outbox import services
from tests.live import ROOT, Stack, embedded, free_port
from tests.outbox.conftest import Sink

pytestmark = pytest.mark.django_db(transaction=True)

RELAY_SETTINGS = ("EMAIL_URL", "EMAIL_BACKEND", "OUTBOX_CAPTURE")


@contextmanager
def live(workspace: Workspace, **env: str) -> Iterator[httpx.Client]:
    """The web process (and smtpd) with ``env`` as its relay settings; an API client with a key."""
    from django.db import connection

    stack = Stack(connection.settings_dict["NAME"])
    for process in {id(stack.web): stack.web, id(stack.smtp): stack.smtp}.values():
        for name in RELAY_SETTINGS:
            process.env.pop(name, None)
        process.env.update(env)
    key = key_services.api_key_create(
        workspace=workspace,
        name="agent",
        scopes=("read", "write", "send"),
        by=Actor.system("tests"),
    )
    stack.start()
    try:
        with stack.client(key.plain) as client:
            yield client
    finally:
        stack.stop()


@pytest.fixture
def inbox(workspace: Workspace) -> Inbox:
    return inbox_services.inbox_create(workspace=workspace, local_part="agent")


def _send(api: httpx.Client, inbox: Inbox, to: str, subject: str) -> dict[str, Any]:
    response = api.post(
        f"inboxes/{inbox.pk}/send", json={"to": [to], "subject": subject, "text": "Hello"}
    )
    assert response.status_code == 200, response.text
    assert response.json()["status"] == "sent"  # the spec's status: handed to delivery
    return response.json()


def _get(api: httpx.Client, item_id: str) -> dict[str, Any]:
    response = api.get(f"outbox/{item_id}")
    assert response.status_code == 200, response.text
    return response.json()


def _at(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def test_the_retry_schedule_is_a_setting(
    workspace: Workspace, inbox: Inbox, sink: Sink, settings: Any
) -> None:
    """``OUTBOX_RETRY_SCHEDULE`` spaces the retries of a transient failure (here one step of
    300 s, ±10 %) and bounds them: one more attempt than steps, then the item is failed."""
    settings.OUTBOX_RETRY_SCHEDULE = [300]  # the sweeper below runs in this process
    sink.answers = ["451 4.3.0 Later", "451 4.3.0 Later again"]
    with live(
        workspace, EMAIL_URL=f"smtp://127.0.0.1:{sink.port}", OUTBOX_RETRY_SCHEDULE="300"
    ) as api:
        first = _get(api, _send(api, inbox, "later@example.com", "one")["id"])
        state = first["delivery"]
        next_at = _at(state["next_attempt_at"])
        with time_machine.travel(next_at + timedelta(seconds=1)):
            assert services.sweep() == 1
        second = _get(api, first["id"])

    assert state["state"] == "retrying"
    waited = next_at - _at(state["attempts"][0]["at"])
    assert timedelta(seconds=270) <= waited <= timedelta(seconds=330)
    assert second["status"] == "failed" and second["delivery"]["state"] == "failed"
    assert ["451" in a["error"] for a in second["delivery"]["attempts"]] == [True, True]


def test_delivered_failed_and_retrying_say_so(
    workspace: Workspace, inbox: Inbox, sink: Sink
) -> None:
    sink.answers = ["250 2.0.0 Ok: queued as 4821", "554 5.7.1 Spam refused", "451 4.3.0 Later"]
    with live(workspace, EMAIL_URL=f"smtp://127.0.0.1:{sink.port}") as api:
        delivered = _get(api, _send(api, inbox, "bob@example.com", "one")["id"])
        failed = _get(api, _send(api, inbox, "eve@example.com", "two")["id"])
        retrying = _get(api, _send(api, inbox, "later@example.com", "three")["id"])
        listed = api.get("outbox", params={"delivery": "retrying"}).json()["data"]
        bad = api.get("outbox", params={"delivery": "shipped"})
        # The retry comes due: the sweeper's attempt gets the 250, and the item says so.
        next_at = _at(retrying["delivery"]["next_attempt_at"])
        with time_machine.travel(next_at + timedelta(seconds=1)):
            assert services.sweep() == 1
        retried = _get(api, retrying["id"])["delivery"]

    assert delivered["status"] == "sent"
    state = delivered["delivery"]
    assert state["state"] == "delivered" and state["reply"] == "250 2.0.0 Ok: queued as 4821"
    assert state["delivered_at"] and state["next_attempt_at"] is None
    assert [(a["reply"], a["error"]) for a in state["attempts"]] == [
        ("250 2.0.0 Ok: queued as 4821", None)
    ]

    assert failed["status"] == "failed" and failed["delivery"]["state"] == "failed"
    assert failed["delivery"]["reply"] is None and failed["delivery"]["delivered_at"] is None
    ((attempt,),) = [failed["delivery"]["attempts"]]
    assert attempt["reply"] is None and "554" in attempt["error"]

    assert retrying["status"] == "sent"
    state = retrying["delivery"]
    assert state["state"] == "retrying" and state["reply"] is None
    assert "451" in state["attempts"][0]["error"]
    first_at = _at(state["attempts"][0]["at"])
    assert (
        timedelta(seconds=20) < next_at - first_at < timedelta(seconds=40)
    )  # OUTBOX_RETRY_SCHEDULE
    assert [row["id"] for row in listed] == [retrying["id"]]
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "validation_error"

    assert retried["state"] == "delivered" and retried["reply"] == "250 OK"
    assert [a["reply"] for a in retried["attempts"]] == [None, "250 OK"]
    assert [m["Subject"] for m in sink.messages()] == ["one", "three"]


def test_a_relay_that_refuses_the_connection_is_retried_not_sent(
    workspace: Workspace, inbox: Inbox
) -> None:
    closed = free_port()  # nothing listens there: the connection is refused
    with live(workspace, EMAIL_URL=f"smtp://127.0.0.1:{closed}", EMAIL_TIMEOUT="3") as api:
        item = _get(api, _send(api, inbox, "bob@example.com", "nobody listens")["id"])
    state = item["delivery"]
    assert item["status"] == "sent" and state["state"] == "retrying"
    assert state["reply"] is None and state["delivered_at"] is None
    assert "ConnectionRefusedError" in state["attempts"][0]["error"]
    assert _at(state["next_attempt_at"]) > _at(state["attempts"][0]["at"])


def test_embedded_mode_without_email_url_captures_external_mail(
    workspace: Workspace, inbox: Inbox
) -> None:
    # Embedded mode's default; the production configuration asks for it explicitly.
    relay = {} if embedded() else {"OUTBOX_CAPTURE": "true"}
    hosted = inbox_services.inbox_create(workspace=workspace, local_part="colleague")
    with live(workspace, **relay) as api:
        captured = _get(api, _send(api, inbox, "bob@example.com", "kept here")["id"])
        internal = _get(api, _send(api, inbox, hosted.address, "to a colleague")["id"])
        raw_stats = api.get("stats").json()
    state = captured["delivery"]
    assert captured["status"] == "sent" and state["state"] == "captured"
    assert state["delivered_at"] is None and state["next_attempt_at"] is None
    assert "not sent" in state["reply"] and "250" not in state["reply"]
    assert [a["error"] for a in state["attempts"]] == [None]
    assert internal["delivery"]["state"] == "internal"
    assert hosted.address in internal["delivery"]["reply"]
    assert raw_stats["outbox_delivery"] == {
        "queued": 0,
        "retrying": 0,
        "delivered": 0,
        "internal": 1,
        "captured": 1,
        "failed": 0,
    }


@pytest.mark.parametrize(
    ("env", "capture"),
    [
        ({"DATABASE_URL": "sqlite:////tmp/pgh-capture-default.sqlite3"}, True),
        ({"DATABASE_URL": "sqlite:////tmp/x.sqlite3", "EMAIL_URL": "smtp://127.0.0.1:2"}, False),
        (
            {
                "DATABASE_URL": "sqlite:////tmp/x.sqlite3",
                "EMAIL_BACKEND": "django_ses.SESBackend",
            },
            False,
        ),
        ({"DATABASE_URL": "postgres://postgres@127.0.0.1:5432/x"}, False),
        ({"DATABASE_URL": "postgres://postgres@127.0.0.1:5432/x", "OUTBOX_CAPTURE": "1"}, True),
    ],
)
def test_capture_is_embedded_modes_default_without_a_relay(
    env: dict[str, str], capture: bool
) -> None:
    base = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "SECRET_KEY": "x" * 50}
    out = subprocess.run(
        [sys.executable, "-c", "from config import settings; print(settings.OUTBOX_CAPTURE)"],
        cwd=ROOT,
        env={**base, **env},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert out == str(capture)

"""``wait`` on send and on GET /outbox/{id}, through the real web process: released by the
decision (made in another process), or answered at the timeout as without ``wait``: 202 on the
send, 200 on GET, the item still pending."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import httpx
import pytest

from apikeys import services as key_services
from apikeys.audit import Actor
from apikeys.models import Workspace
from inboxes import services as inbox_services
from outbox import services
from outbox.models import OutboxItem
from tests.factories import UserFactory
from tests.live import Stack


@pytest.fixture(scope="module")
def stack(django_db_setup: None, django_db_blocker) -> Iterator[Stack]:  # type: ignore[no-untyped-def]
    from django.db import connection

    running = Stack(connection.settings_dict["NAME"]).start()
    yield running
    running.stop()


@pytest.fixture
def client(stack: Stack, transactional_db: None, workspace: Workspace) -> Iterator[httpx.Client]:
    workspace.require_approval = True
    workspace.save()
    inbox_services.inbox_create(workspace=workspace, local_part="waiting")
    key = key_services.api_key_create(
        workspace=workspace, name="k", scopes=["admin"], by=Actor.system("tests")
    ).plain
    with stack.client(key) as http:
        yield http


def decide_soon(decision: str, delay: float = 0.7) -> threading.Thread:
    """Decides the pending item from another thread once it exists and ``delay`` has passed
    (the send that creates it may still be on its way on a busy machine)."""

    def run() -> None:
        from django.db import connection

        try:
            time.sleep(delay)
            deadline = time.monotonic() + 20
            while (item := OutboxItem.objects.filter(status="pending").first()) is None:
                assert time.monotonic() < deadline, "no pending item appeared"
                time.sleep(0.05)
            services.decide(
                item=item,
                user=UserFactory(),
                role="owner",
                decision=decision,
                by=Actor.system("tests"),
            )
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_send_waits_for_the_decision(client: httpx.Client) -> None:
    decider = decide_soon("approve")
    started = time.monotonic()
    response = client.post(
        "inboxes/waiting@pigeonhole.test/send",
        params={"wait": 30},
        json={"to": ["waiting@pigeonhole.test"], "subject": "ok?", "text": "t"},
    )
    decider.join()
    assert response.status_code == 200 and response.json()["status"] == "sent"
    assert 0.5 < time.monotonic() - started < 10


def test_get_waits_for_rejection_and_times_out(client: httpx.Client) -> None:
    item = client.post(
        "inboxes/waiting@pigeonhole.test/send",
        json={"to": ["x@example.com"], "subject": "s", "text": "t"},
    ).json()
    assert item["status"] == "pending"
    assert client.get(f"outbox/{item['id']}").status_code == 200
    response = client.get(f"outbox/{item['id']}", params={"wait": 1})
    assert response.status_code == 200 and response.json()["status"] == "pending"
    decider = decide_soon("reject")
    response = client.get(f"outbox/{item['id']}", params={"wait": 30})
    decider.join()
    assert response.status_code == 200 and response.json()["status"] == "rejected"
    assert client.get(f"outbox/{item['id']}", params={"wait": 121}).status_code == 400
    assert client.get("outbox/out_nope", params={"wait": 5}).status_code == 404


def test_a_send_still_pending_at_the_timeout_answers_202(client: httpx.Client) -> None:
    response = client.post(
        "inboxes/waiting@pigeonhole.test/send",
        params={"wait": 1},
        json={"to": ["x@example.com"], "subject": "s", "text": "t"},
    )
    assert response.status_code == 202 and response.json()["status"] == "pending"

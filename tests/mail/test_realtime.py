"""Wait and stream end to end: the SMTP receiver and the web app run as separate processes
against PostgreSQL and Redis; the test talks SMTP and HTTP to them like a client would."""

from __future__ import annotations

import smtplib
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from apikeys import services as key_services
from apikeys.audit import Actor
from apikeys.models import Workspace
from events import services as events
from inboxes import services as inbox_services
from inboxes.models import Inbox
from labels.models import Label
from tests.live import Stack, sse_events
from tests.mail.messages import message


@pytest.fixture(scope="module")
def stack(django_db_setup: None, django_db_blocker) -> Iterator[Stack]:  # type: ignore[no-untyped-def]
    from django.db import connection

    running = Stack(connection.settings_dict["NAME"]).start()
    yield running
    running.stop()


@pytest.fixture
def setup(transactional_db: None, workspace: Workspace) -> tuple[Inbox, str]:
    inbox = inbox_services.inbox_create(workspace=workspace, local_part="live")
    key = key_services.api_key_create(
        workspace=workspace, name="live", scopes=["admin"], by=Actor.system("tests")
    ).plain
    return inbox, key


def send(stack: Stack, raw: bytes, to: str, mail_from: str = "sender@example.org") -> float:
    """Sends over SMTP; returns the monotonic time the DATA 250 arrived."""
    with smtplib.SMTP("127.0.0.1", stack.smtp_port, timeout=30) as smtp:
        smtp.sendmail(mail_from, [to], raw)
        return time.monotonic()


class Waiter(threading.Thread):
    def __init__(self, client: httpx.Client, path: str, params: dict) -> None:
        super().__init__(daemon=True)
        self.client, self.path, self.params = client, path, params
        self.response: httpx.Response | None = None
        self.finished_at = 0.0

    def run(self) -> None:
        self.response = self.client.get(self.path, params=self.params)
        self.finished_at = time.monotonic()


def parked_since() -> str:
    """A ``since`` taken before a waiter's request: on a machine too slow to park the waiter
    before the mail arrives, the wait still finds the mail rather than missing it (the default,
    ``since`` = the request's arrival, would)."""
    return (datetime.now(UTC) - timedelta(seconds=1)).isoformat()


def test_waiter_returns_promptly_after_smtp(stack: Stack, setup: tuple[Inbox, str]) -> None:
    inbox, key = setup
    with stack.client(key) as client:
        params = {"timeout": 30, "since": parked_since()}
        waiter = Waiter(client, f"inboxes/{inbox.address}/wait", params)
        waiter.start()
        time.sleep(0.5)  # parked (and if not yet, `since` still finds the mail)
        acked = send(stack, message(to=inbox.address, subject="Code 123456"), inbox.address)
        waiter.join(10)
    assert waiter.response is not None and waiter.response.status_code == 200
    body = waiter.response.json()
    assert body["subject"] == "Code 123456" and body["inbox_id"] == inbox.pk
    assert body["extracted"]["code"] == "123456"
    assert waiter.finished_at - acked < 1.0  # woken by the event, not by a poll


def test_since_catches_mail_that_arrived_before(stack: Stack, setup: tuple[Inbox, str]) -> None:
    inbox, key = setup
    before = datetime.now(UTC) - timedelta(seconds=5)
    send(stack, message(to=inbox.address, subject="early"), inbox.address)
    with stack.client(key) as client:
        response = client.get(f"inboxes/{inbox.pk}/wait", params={"timeout": 0})
        assert response.status_code == 204  # default since = now: only new mail
        response = client.get(
            f"inboxes/{inbox.pk}/wait", params={"timeout": 30, "since": before.isoformat()}
        )
    # From the log (nothing else arrives: a wait that missed it would end empty, with a 204).
    assert response.status_code == 200 and response.json()["subject"] == "early"


def test_filters_and_timeout(stack: Stack, setup: tuple[Inbox, str]) -> None:
    inbox, key = setup
    with stack.client(key) as client:
        waiter = Waiter(
            client,
            f"inboxes/{inbox.pk}/wait",
            {
                "timeout": 20,
                "from": "ALERTS@bank",
                "subject": r"^sign[- ]in code \d+$",
                "since": parked_since(),
            },
        )
        waiter.start()
        time.sleep(0.5)  # parked (or not yet: the filters decide either way)
        send(
            stack,
            message(to=inbox.address, sender="alerts@bank.example", subject="Newsletter"),
            inbox.address,
        )
        send(
            stack,
            message(to=inbox.address, sender="promo@shop.example", subject="Sign-in code 1"),
            inbox.address,
        )
        time.sleep(0.5)
        assert waiter.is_alive()  # neither matched
        send(
            stack,
            message(to=inbox.address, sender="alerts@bank.example", subject="Sign-in code 99"),
            inbox.address,
        )
        waiter.join(10)
        assert waiter.response is not None and waiter.response.status_code == 200
        assert waiter.response.json()["subject"] == "Sign-in code 99"
        started = time.monotonic()
        response = client.get(f"inboxes/{inbox.pk}/wait", params={"timeout": 1, "subject": "zzz"})
        assert response.status_code == 204 and response.content == b""
        assert 0.9 <= time.monotonic() - started < 5


def test_wait_errors(stack: Stack, setup: tuple[Inbox, str], other_workspace: Workspace) -> None:
    inbox, key = setup
    other = key_services.api_key_create(
        workspace=other_workspace, name="o", scopes=["admin"], by=Actor.system("tests")
    ).plain
    sender = key_services.api_key_create(
        workspace=inbox.workspace, name="s", scopes=["send"], by=Actor.system("tests")
    ).plain
    path = f"inboxes/{inbox.pk}/wait"
    with stack.client(key) as client:
        for params, field in [
            ({"timeout": 121}, "timeout"),
            ({"timeout": -1}, "timeout"),
            ({"subject": "("}, "subject"),
            ({"since": "soon"}, "since"),
        ]:
            response = client.get(path, params=params)
            assert response.status_code == 400, params
            assert response.json()["error"]["code"] == "validation_error"
            assert response.json()["error"]["issues"][0]["path"] == field
        assert client.get("inboxes/nobody@pigeonhole.test/wait").status_code == 404
    with stack.client(other) as client:
        response = client.get(path, params={"timeout": 0})
        assert response.status_code == 404 and response.json()["error"]["code"] == "not_found"
    with stack.client(sender) as client:
        response = client.get(path, params={"timeout": 0})
        assert response.json()["error"]["code"] == "insufficient_scope"
    response = httpx.get(stack.base_url + f"/api/v1/{path}")
    assert response.status_code == 401 and response.json()["error"]["code"] == "unauthorized"


def collect(
    stack: Stack,
    key: str,
    inbox: Inbox,
    count: int,
    headers: dict | None = None,
    params: dict | None = None,
) -> tuple[list[dict], threading.Thread]:
    """Follows the stream in a thread until ``count`` events arrived."""
    got: list[dict] = []
    connected = threading.Event()

    def run() -> None:
        with (
            stack.client(key) as client,
            client.stream(
                "GET", f"inboxes/{inbox.pk}/stream", headers=headers or {}, params=params or {}
            ) as response,
        ):
            assert response.headers["content-type"].startswith("text/event-stream")
            assert response.headers["cache-control"] == "no-cache"
            assert response.headers["x-accel-buffering"] == "no"
            connected.set()
            for event in sse_events(response):
                got.append(event)
                if len(got) >= count:
                    return

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert connected.wait(10)
    time.sleep(0.3)
    return got, thread


def test_stream_delivers_every_kind(stack: Stack, setup: tuple[Inbox, str]) -> None:
    inbox, key = setup
    Inbox.objects.filter(pk=inbox.pk).update(block_senders=["blocked.example"])
    Label.objects.create(workspace=inbox.workspace, key="vip", name="VIP")
    got, thread = collect(stack, key, inbox, 6)
    send(
        stack,
        message(
            to=inbox.address,
            sender="a@shop.example",
            subject="Code 4321 here",
            text="Your code is 4321",
        ),
        inbox.address,
    )
    with stack.client(key) as client:
        email_id = client.get("emails").json()["data"][0]["id"]
        client.patch(f"emails/{email_id}", json={"read": True, "starred": True})
        client.patch(f"emails/{email_id}", json={"labels": ["vip"]})
        events.emit(
            workspace_id=inbox.workspace_id,
            inbox_id=inbox.pk,
            type=events.EMAIL_LABELED,
            data={
                "email": {"id": email_id},
                "labels": [{"key": "vip", "source": "rule", "confidence": 1}],
            },
        )
        with pytest.raises(smtplib.SMTPDataError):
            send(stack, message(to=inbox.address, sender="x@blocked.example"), inbox.address)
        client.delete(f"emails/{email_id}")
    thread.join(15)
    kinds = [e["event"] for e in got]
    assert kinds == [
        "email.received",
        "email.updated",
        "email.updated",
        "email.labeled",
        "mail.rejected",
        "email.deleted",
    ]
    ids = [int(e["id"]) for e in got]
    assert ids == sorted(ids) and len(set(ids)) == 6
    received, updated, relabeled, labeled, rejected, deleted = (e["data"] for e in got)
    assert set(received) == {"type", "inboxId", "emailId", "from", "subject", "code", "at"}
    assert received["type"] == "email.received" and received["inboxId"] == inbox.pk
    assert received["emailId"] == email_id and received["from"] == "a@shop.example"
    assert received["subject"] == "Code 4321 here" and received["code"] == "4321"
    assert abs(received["at"] / 1000 - time.time()) < 60
    assert updated == {
        "type": "email.updated",
        "inboxId": inbox.pk,
        "emailId": email_id,
        "read": True,
        "starred": True,
        "labels": [],
        "at": updated["at"],
    }
    assert relabeled["labels"] == [{"key": "vip", "source": "manual", "confidence": 1.0}]
    assert set(labeled) == {"type", "inboxId", "emailId", "labels", "at"}
    assert labeled["labels"][0]["key"] == "vip"
    assert rejected == {
        "type": "mail.rejected",
        "inboxId": inbox.pk,
        "from": "x@blocked.example",
        "reason": "Sender not accepted by this mailbox",
        "at": rejected["at"],
    }
    assert set(deleted) == {"type", "inboxId", "emailId", "at"} and deleted["emailId"] == email_id


def test_reconnect_with_last_event_id_and_web_restart(
    stack: Stack, setup: tuple[Inbox, str]
) -> None:
    inbox, key = setup
    got, thread = collect(stack, key, inbox, 2)
    for i in range(2):
        send(stack, message(to=inbox.address, subject=f"first {i}"), inbox.address)
    thread.join(15)
    assert [e["data"]["subject"] for e in got] == ["first 0", "first 1"]
    last_seen = got[-1]["id"]

    stack.web.restart()  # kill -9 the web process: the log, not the process, holds the events
    for i in range(3):
        send(stack, message(to=inbox.address, subject=f"missed {i}"), inbox.address)

    resumed, thread = collect(stack, key, inbox, 4, headers={"Last-Event-ID": last_seen})
    send(stack, message(to=inbox.address, subject="live"), inbox.address)
    thread.join(15)
    subjects = [e["data"]["subject"] for e in resumed]
    assert subjects == [
        "missed 0",
        "missed 1",
        "missed 2",
        "live",
    ]  # exactly the missed, none twice
    again, thread = collect(stack, key, inbox, 1, params={"last_event_id": resumed[1]["id"]})
    thread.join(15)
    assert again[0]["data"]["subject"] == "missed 2"


def test_stream_auth(stack: Stack, setup: tuple[Inbox, str], other_workspace: Workspace) -> None:
    inbox, key = setup
    other = key_services.api_key_create(
        workspace=other_workspace, name="o", scopes=["read"], by=Actor.system("tests")
    ).plain
    url = stack.base_url + f"/api/v1/inboxes/{inbox.pk}/stream"
    assert httpx.get(url).json()["error"]["code"] == "unauthorized"
    response = httpx.get(url, headers={"Authorization": f"Bearer {other}"})
    assert response.status_code == 404 and response.json()["error"]["code"] == "not_found"
    with httpx.stream("GET", url, params={"access_token": key}, timeout=10) as response:
        assert response.status_code == 200
        first = next(response.iter_lines())
        assert first == ": connected"


def test_lost_wake_ups_are_recovered_from_the_log(
    stack: Stack, setup: tuple[Inbox, str], settings: Any
) -> None:
    """Mail whose wake-up nobody hears (published under another channel-layer prefix, as if the
    web process was cut off from Redis at that moment) still reaches the parked waiter and the
    stream: the web process's sweep reads the log."""
    from mail.pipeline import receive_one

    inbox, key = setup
    if settings.REDIS_URL:  # embedded: this process's in-memory layer is unheard by the server
        settings.CHANNEL_LAYERS = {
            "default": {
                "BACKEND": "config.layers.PubSubLayer",
                "CONFIG": {"hosts": [settings.REDIS_URL], "prefix": "nobody-listens"},
            }
        }
    got, thread = collect(stack, key, inbox, 2)
    with stack.client(key) as client:
        params = {"timeout": 60, "subject": "^lost", "since": parked_since()}
        waiter = Waiter(client, f"inboxes/{inbox.pk}/wait", params)
        waiter.start()
        time.sleep(0.5)  # parked (and if not yet, `since` still finds the mail)
        receive_one(message(to=inbox.address, subject="lost 1"), to=inbox.address)
        receive_one(message(to=inbox.address, subject="lost 2"), to=inbox.address)
        waiter.join(30)
    thread.join(30)
    assert waiter.response is not None and waiter.response.status_code == 200
    assert waiter.response.json()["subject"] == "lost 1"
    assert [e["data"]["subject"] for e in got] == ["lost 1", "lost 2"]


def test_resuming_far_behind_gets_the_whole_backlog(stack: Stack, setup: tuple[Inbox, str]) -> None:
    """A client that resumes more than one page of the log behind (its web process was down a
    while, the inbox busy) gets every missed event at once, without waiting for new mail; the
    missed events are older than the hub's sweep looks back, so only the replay can carry them."""
    from django.utils import timezone

    from events.models import Event

    inbox, key = setup
    before = Event.objects.filter(inbox_id=inbox.pk).order_by("-id").first()
    backlog = 1100
    Event.objects.bulk_create(
        Event(
            workspace_id=inbox.workspace_id,
            inbox_id=inbox.pk,
            type=events.EMAIL_DELETED,
            data={"email": {"id": f"eml_backlog{n}"}},
        )
        for n in range(backlog)
    )
    Event.objects.filter(inbox_id=inbox.pk, type=events.EMAIL_DELETED).update(
        created_at=timezone.now() - timedelta(minutes=10)
    )
    got, thread = collect(
        stack, key, inbox, backlog, headers={"Last-Event-ID": str(before.pk if before else 0)}
    )
    thread.join(20)
    assert len(got) == backlog
    assert [e["data"]["emailId"] for e in got] == [f"eml_backlog{n}" for n in range(backlog)]


def test_wait_since_looks_past_many_non_matching_emails(
    stack: Stack, setup: tuple[Inbox, str]
) -> None:
    """``since`` reaching back over more emails than one read of the inbox returns (none of
    them matching) still finds the matching email after them, however old it is (older than
    the hub's sweep looks back: only the first read can find it)."""
    from django.utils import timezone

    from mail.models import Email

    inbox, key = setup
    since = timezone.now() - timedelta(minutes=10)
    Email.objects.bulk_create(
        [
            *(
                Email(
                    workspace_id=inbox.workspace_id,
                    inbox=inbox,
                    subject=f"noise {n}",
                    received_at=since + timedelta(seconds=1, milliseconds=n),
                )
                for n in range(600)
            ),
            Email(
                workspace_id=inbox.workspace_id,
                inbox=inbox,
                subject="the one",
                received_at=since + timedelta(seconds=2),
                extracted={"code": None, "link": None, "codes": [], "links": []},
            ),
        ]
    )
    with stack.client(key) as client:
        response = client.get(
            f"inboxes/{inbox.pk}/wait",
            params={"timeout": 3, "since": since.isoformat(), "subject": "^the one$"},
        )
    assert response.status_code == 200 and response.json()["subject"] == "the one"


def test_a_wait_over_much_old_mail_keeps_a_watermark_and_answers_204_at_its_timeout(
    stack: Stack, setup: tuple[Inbox, str]
) -> None:
    """A ``since`` far back over many emails that do not match: the read keeps no id per email
    it rejects (a watermark of the newest it judged: the progress stays small), stops at the
    wait's deadline inside its loop (then goes on from the watermark, not from the start), and
    the wait answers 204 at its timeout."""
    import asyncio
    import pickle

    from django.utils import timezone

    from config.patterns import Budget
    from mail import waiting
    from mail.models import Email

    inbox, key = setup
    since = timezone.now() - timedelta(days=30)
    noise = Email.objects.bulk_create(
        Email(
            workspace_id=inbox.workspace_id,
            inbox=inbox,
            subject=f"noise {n}",
            received_at=since + timedelta(seconds=1, milliseconds=n),
        )
        for n in range(1_200)
    )
    query = waiting.WaitQuery(data={"subject": "^never$"})
    assert query.is_valid(), query.errors
    progress = waiting.Progress(needed=1)
    more = asyncio.run(
        waiting.find(
            inbox.workspace, inbox, since, query.validated_data, progress, Budget(), stop_at=0.0
        )
    )
    assert more is True  # the deadline had passed: one page judged, the rest left
    last = noise[waiting.FIND_BATCH - 1]
    assert progress.read_upto == (last.received_at, last.pk)
    more = asyncio.run(
        waiting.find(inbox.workspace, inbox, since, query.validated_data, progress, Budget())
    )
    assert more is False and not progress.matched
    assert progress.read_upto == (noise[-1].received_at, noise[-1].pk)
    assert len(pickle.dumps(progress)) < 1_000  # 1,200 rejected ids would take ~40 KB
    with stack.client(key) as client:
        response = client.get(
            f"inboxes/{inbox.pk}/wait",
            params={"timeout": 1, "since": since.isoformat(), "subject": "^never$"},
        )
    assert response.status_code == 204

"""Sending from an inbox: MIME, internal and external delivery, threading, relay failures,
idempotency, approvals by session, expiry, forward_to, and the events of every transition."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
import time_machine
from django.utils import timezone
from rest_framework.test import APIClient

from apikeys import services as key_services
from apikeys.audit import Actor
from apikeys.models import Workspace
from apikeys.principal import Principal
from events.models import Event
from inboxes import services as inbox_services
from inboxes.models import Inbox
from mail import pipeline
from mail.models import Email
from outbox import services
from outbox.models import OutboxItem
from tests.conftest import Api, error_of
from tests.factories import MembershipFactory
from tests.mail.messages import message
from tests.outbox.conftest import Sink

# Delivery is handed over after commit: these tests commit for real.
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def inbox(workspace: Workspace) -> Inbox:
    return inbox_services.inbox_create(workspace=workspace, local_part="agent", name="Agent Smith")


def outbound_events(item_id: str) -> list[str]:
    return [
        e.type
        for e in Event.objects.filter(type__startswith="outbound.").order_by("id")
        if e.data["outbound"]["id"] == item_id
    ]


def test_send_external_mime(api: Api, inbox: Inbox, sink: Sink) -> None:
    response = api.call(
        "POST",
        f"inboxes/{inbox.address}/send",
        {
            "to": ["bob@example.com"],
            "cc": ["carol@example.org"],
            "subject": "Hello Bob",
            "text": "Plain body",
            "html": "<p>HTML body</p>",
            "reason": "Follow-up",
        },
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["status"] == "sent" and body["id"].startswith("out_")
    assert body["from"] == {"address": inbox.address, "name": "Agent Smith"}
    assert body["approval_required"] is False and body["sent_at"]
    ((mail_from, rcpts, raw),) = sink.received
    assert mail_from == inbox.address and sorted(rcpts) == ["bob@example.com", "carol@example.org"]
    msg = sink.messages()[0]
    assert msg["From"] == f"Agent Smith <{inbox.address}>"
    assert msg["To"] == "bob@example.com" and msg["Cc"] == "carol@example.org"
    assert msg["Subject"] == "Hello Bob" and msg["Date"]
    assert msg["Message-ID"] == f"<{body['message_id']}>"
    assert msg.get_content_type() == "multipart/alternative"
    assert msg.get_body(("plain",)).get_content().strip() == "Plain body"
    assert msg.get_body(("html",)).get_content().strip() == "<p>HTML body</p>"
    assert bytes(OutboxItem.objects.get(pk=body["id"]).raw) == raw  # a copy of what was sent
    assert outbound_events(body["id"]) == ["outbound.sent"]


def test_send_internal_goes_through_the_pipeline(
    api: Api, inbox: Inbox, workspace: Workspace, sink: Sink
) -> None:
    target = inbox_services.inbox_create(workspace=workspace, local_part="target")
    response = api.call(
        "POST",
        f"inboxes/{inbox.pk}/send",
        {"to": [target.address], "subject": "Your code is 771234", "text": "Code: 771234"},
    )
    assert response.status_code == 200
    email = Email.objects.get(inbox=target)
    assert email.subject == "Your code is 771234" and email.extracted["code"] == "771234"
    assert email.from_address == inbox.address
    assert Event.objects.filter(type="email.received", inbox_id=target.pk).count() == 1
    assert sink.received == []


def test_reply_threads(api: Api, inbox: Inbox, sink: Sink) -> None:
    raw = message(to=inbox.address, subject="Question", headers={"References": "<root@x.example>"})
    original = Email.objects.get(pk=pipeline.receive_one(raw, to=inbox.address).email_id)
    response = api.call(
        "POST",
        f"inboxes/{inbox.pk}/send",
        {
            "to": ["asker@example.com"],
            "subject": "Re: Question",
            "text": "Answer",
            "in_reply_to": original.pk,
        },
    )
    assert response.json()["in_reply_to"] == original.pk
    msg = sink.messages()[0]
    assert msg["In-Reply-To"] == f"<{original.message_id}>"
    assert msg["References"].split() == ["<root@x.example>", f"<{original.message_id}>"]


def test_send_validation_and_tenancy(
    api: Api, other_api: Api, inbox: Inbox, workspace: Workspace
) -> None:
    path = f"inboxes/{inbox.pk}/send"
    for body, field in [
        ({"subject": "s", "text": "t"}, "to"),
        ({"to": [], "subject": "s", "text": "t"}, "to"),
        ({"to": ["not-an-address"], "subject": "s", "text": "t"}, "to.0"),
        ({"to": ["a@b.example"], "text": "t"}, "subject"),
        ({"to": ["a@b.example"], "subject": "s"}, "text"),
        ({"to": ["a@b.example"], "subject": "s", "text": "t", "cc": ["x"]}, "cc.0"),
        (
            {"to": ["a@b.example"], "subject": "s", "text": "t", "in_reply_to": "eml_nope"},
            "in_reply_to",
        ),
    ]:
        response = api.call("POST", path, body)
        assert error_of(response) == (400, "validation_error"), body
        assert response.json()["error"]["issues"][0]["path"] == field
    assert error_of(
        other_api.call("POST", path, {"to": ["a@b.example"], "subject": "s", "text": "t"})
    ) == (404, "not_found")
    theirs = inbox_services.inbox_create(workspace=other_api_workspace(other_api), local_part="x")
    email_id = pipeline.receive_one(message(to=theirs.address), to=theirs.address).email_id
    response = api.call(
        "POST", path, {"to": ["a@b.example"], "subject": "s", "text": "t", "in_reply_to": email_id}
    )
    assert error_of(response) == (400, "validation_error")  # another workspace's email
    assert OutboxItem.objects.count() == 0


def other_api_workspace(client: Api) -> Workspace:
    return Workspace.objects.get(pk=client.call("GET", "me").json()["workspace"]["id"])


def test_relay_failures(api: Api, inbox: Inbox, sink: Sink) -> None:
    sink.answers = ["550 5.1.1 No such user"]
    body = api.call(
        "POST",
        f"inboxes/{inbox.pk}/send",
        {"to": ["gone@example.com"], "subject": "s", "text": "t"},
    ).json()
    item = OutboxItem.objects.get(pk=body["id"])
    assert item.status == "failed" and "550" in item.error
    assert outbound_events(item.pk) == ["outbound.sent", "outbound.failed"]
    sink.answers = ["451 4.3.0 Try later"]
    body = api.call(
        "POST",
        f"inboxes/{inbox.pk}/send",
        {"to": ["later@example.com"], "subject": "s2", "text": "t"},
    ).json()
    item = OutboxItem.objects.get(pk=body["id"])
    assert item.status == "sent" and item.delivery == "retrying" and "451" in item.error
    with time_machine.travel(timezone.now() + timedelta(minutes=1)):
        assert services.sweep() == 1
    item.refresh_from_db()
    assert item.delivery == "done" and item.attempts == 2
    assert [rcpts for _, rcpts, _ in sink.received] == [["later@example.com"]]


def test_idempotency_key(api: Api, inbox: Inbox, sink: Sink) -> None:
    body = {"to": ["bob@example.com"], "subject": "Once", "text": "Only once"}
    first = api.post(
        f"/api/v1/inboxes/{inbox.pk}/send", body, format="json", HTTP_IDEMPOTENCY_KEY="k-1"
    )
    again = api.post(
        f"/api/v1/inboxes/{inbox.pk}/send", body, format="json", HTTP_IDEMPOTENCY_KEY="k-1"
    )
    assert first.status_code == again.status_code == 200
    # The replay is the same item as it is now: handed over then, delivered since.
    replay = again.json()
    assert {**first.json(), "delivery": replay["delivery"]} == replay
    assert (first.json()["delivery"]["state"], replay["delivery"]["state"]) == (
        "queued",
        "delivered",
    )
    assert len(sink.received) == 1 and OutboxItem.objects.count() == 1
    other = api.post(
        f"/api/v1/inboxes/{inbox.pk}/send",
        {**body, "text": "changed"},
        format="json",
        HTTP_IDEMPOTENCY_KEY="k-1",
    )
    assert error_of(other) == (400, "validation_error")
    assert other.json()["error"]["issues"][0]["path"] == "Idempotency-Key"


@pytest.fixture
def approvals(workspace: Workspace) -> Workspace:
    workspace.require_approval = True
    workspace.save()
    return workspace


def session(workspace: Workspace, role: str, csrf: bool = True) -> APIClient:
    membership = MembershipFactory(workspace=workspace, role=role)
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(membership.user)
    if csrf:
        client.get("/admin/login/")
        client.credentials(HTTP_X_CSRFTOKEN=client.cookies["csrftoken"].value)
    return client


def test_approval_flow_with_edits(api: Api, approvals: Workspace, inbox: Inbox, sink: Sink) -> None:
    response = api.call(
        "POST",
        f"inboxes/{inbox.pk}/send",
        {
            "to": ["bob@example.com"],
            "subject": "Draft",
            "text": "Draft text",
            "reason": "Needs a human",
        },
    )
    assert response.status_code == 202
    item = response.json()
    assert item["status"] == "pending" and item["approval_required"] is True and sink.received == []
    assert [i["id"] for i in api.call("GET", "outbox", {"status": "pending"}).json()["data"]] == [
        item["id"]
    ]
    owner = session(approvals, "owner")
    decided = owner.post(
        f"/api/v1/outbox/{item['id']}/decision",
        {"decision": "approve", "subject": "Final", "text": "Final text", "note": "ok"},
        format="json",
    )
    assert decided.status_code == 200, decided.content
    body = decided.json()
    assert body["status"] == "sent" and body["decided_by"] and body["decision_note"] == "ok"
    msg = sink.messages()[0]
    assert msg["Subject"] == "Final" and msg.get_content().strip() == "Final text"
    again = owner.post(
        f"/api/v1/outbox/{item['id']}/decision", {"decision": "reject"}, format="json"
    )
    assert error_of(again) == (409, "invalid_state")
    assert outbound_events(item["id"]) == ["outbound.pending", "outbound.sent"]


def test_an_edited_text_replaces_the_html_part(
    api: Api, approvals: Workspace, inbox: Inbox, sink: Sink
) -> None:
    body = {"to": ["shop@example.com"], "subject": "Order", "text": "please cancel my order"}
    item = api.call(
        "POST", f"inboxes/{inbox.pk}/send", {**body, "html": "<b>please cancel</b> my order"}
    ).json()
    owner = session(approvals, "owner")
    decided = owner.post(
        f"/api/v1/outbox/{item['id']}/decision",
        {"decision": "approve", "text": "please keep my order\n\nThanks & bye <Ann>"},
        format="json",
    )
    assert decided.status_code == 200, decided.content
    rendered = "<p>please keep my order</p>\n\n<p>Thanks &amp; bye &lt;Ann&gt;</p>"
    assert decided.json()["html"] == rendered
    ((_, _, raw),) = sink.received
    msg = sink.messages()[0]
    assert msg.get_body(("plain",)).get_content().replace("\r\n", "\n") == (
        "please keep my order\n\nThanks & bye <Ann>\n"
    )
    assert msg.get_body(("html",)).get_content().replace("\r\n", "\n").strip() == rendered
    assert b"please cancel" not in raw
    # An unedited text keeps the agent's HTML part as it was.
    item = api.call("POST", f"inboxes/{inbox.pk}/send", {**body, "html": "<i>as is</i>"}).json()
    owner.post(f"/api/v1/outbox/{item['id']}/decision", {"decision": "approve"}, format="json")
    assert sink.messages()[1].get_body(("html",)).get_content().strip() == "<i>as is</i>"


def test_a_forwarded_copy_takes_no_edits(approvals: Workspace, inbox: Inbox, sink: Sink) -> None:
    item = OutboxItem.objects.create(
        workspace=approvals,
        inbox=inbox,
        kind="forward",
        from_address=inbox.address,
        to=["keeper@example.com"],
        status="pending",
        approval_required=True,
        raw=b"Subject: as received\r\n\r\nbody\r\n",
    )
    owner = session(approvals, "owner")
    edited = owner.post(
        f"/api/v1/outbox/{item.pk}/decision",
        {"decision": "approve", "text": "changed"},
        format="json",
    )
    assert error_of(edited) == (400, "validation_error")
    assert OutboxItem.objects.get(pk=item.pk).status == "pending" and sink.received == []
    approved = owner.post(
        f"/api/v1/outbox/{item.pk}/decision", {"decision": "approve"}, format="json"
    )
    assert approved.status_code == 200
    ((_, rcpts, raw),) = sink.received
    assert rcpts == ["keeper@example.com"] and raw.endswith(b"Subject: as received\r\n\r\nbody\r\n")


def test_reject_and_who_may_decide(
    api: Api, approvals: Workspace, inbox: Inbox, sink: Sink, workspace: Workspace, make_key
) -> None:  # type: ignore[no-untyped-def]
    item = api.call(
        "POST", f"inboxes/{inbox.pk}/send", {"to": ["bob@example.com"], "subject": "s", "text": "t"}
    ).json()
    path = f"/api/v1/outbox/{item['id']}/decision"
    for scopes in [("read",), ("write",), ("send",), ("admin",)]:
        response = Api(make_key(workspace, scopes)).post(
            path, {"decision": "approve"}, format="json"
        )
        assert response.status_code == 403, scopes
        assert response.json()["error"]["code"] in {"forbidden", "insufficient_scope"}
        if "admin" in scopes:
            assert response.json()["error"]["code"] == "forbidden"
    assert error_of(
        session(approvals, "member").post(path, {"decision": "approve"}, format="json")
    ) == (403, "forbidden")
    assert error_of(
        session(approvals, "owner", csrf=False).post(path, {"decision": "approve"}, format="json")
    ) == (403, "forbidden")
    admin = session(approvals, "admin")
    rejected = admin.post(path, {"decision": "reject", "note": "no"}, format="json").json()
    assert rejected["status"] == "rejected" and sink.received == []
    assert outbound_events(item["id"]) == ["outbound.pending", "outbound.rejected"]


def test_key_requiring_approval(workspace: Workspace, inbox: Inbox, make_key, sink: Sink) -> None:  # type: ignore[no-untyped-def]
    careful = Api(make_key(workspace, ("send",), require_approval=True))
    response = careful.call(
        "POST", f"inboxes/{inbox.pk}/send", {"to": ["x@example.com"], "subject": "s", "text": "t"}
    )
    assert response.status_code == 202 and sink.received == []


def test_pending_items_expire(api: Api, approvals: Workspace, inbox: Inbox, sink: Sink) -> None:
    item = api.call(
        "POST", f"inboxes/{inbox.pk}/send", {"to": ["x@example.com"], "subject": "s", "text": "t"}
    ).json()
    assert services.expire_pending() == 0
    with time_machine.travel(timezone.now() + timedelta(hours=73)):
        assert services.expire_pending() == 1
    assert api.call("GET", f"outbox/{item['id']}").json()["status"] == "expired"
    owner = session(approvals, "owner")
    response = owner.post(
        f"/api/v1/outbox/{item['id']}/decision", {"decision": "approve"}, format="json"
    )
    assert error_of(response) == (409, "invalid_state") and sink.received == []


def test_forward_to_and_loop_guard(workspace: Workspace, sink: Sink) -> None:
    created = key_services.api_key_create(
        workspace=workspace, name="setter", scopes=["admin"], by=Actor.system("tests")
    )
    setter = Principal(workspace=workspace, scopes=created.key.effective_scopes, key=created.key)
    a = inbox_services.inbox_create(workspace=workspace, local_part="a")
    b = inbox_services.inbox_create(workspace=workspace, local_part="b", forward_to=None)
    inbox_services.inbox_update(inbox=a, principal=setter, forward_to=b.address)
    inbox_services.inbox_update(inbox=b, principal=setter, forward_to=a.address)  # a loop
    external = inbox_services.inbox_create(
        workspace=workspace, local_part="c", principal=setter, forward_to="me@elsewhere.example"
    )
    pipeline.receive_one(message(to=a.address, subject="Ping"), to=a.address)
    assert Email.objects.filter(inbox=a).count() == 1
    copy = Email.objects.get(inbox=b)
    assert copy.subject == "Ping" and any(h[0] == "X-Pigeonhole-Forwarded-By" for h in copy.headers)
    assert copy.from_address == a.address  # from the forwarding inbox, never the original From
    assert OutboxItem.objects.filter(kind="forward").count() == 1  # b did not forward it back
    pipeline.receive_one(message(to=external.address, subject="Out"), to=external.address)
    forwarded = OutboxItem.objects.get(inbox=external)
    # Set by a key that needs no approval, in a workspace that needs none: sent at once.
    assert forwarded.status == "sent" and forwarded.approval_required is False
    assert forwarded.key_id == created.key.pk
    assert sink.received[0][1] == ["me@elsewhere.example"]


def test_stats_count_outbox(api: Api, inbox: Inbox, sink: Sink) -> None:
    api.call(
        "POST", f"inboxes/{inbox.pk}/send", {"to": ["x@example.com"], "subject": "s", "text": "t"}
    )
    assert api.call("GET", "stats").json()["outbox"]["sent"] == 1


def test_concurrent_approvals_send_once(
    api: Api, approvals: Workspace, inbox: Inbox, sink: Sink
) -> None:
    import threading

    from django.db import connection

    from outbox.exceptions import InvalidState
    from tests.factories import UserFactory

    item_id = api.call(
        "POST", f"inboxes/{inbox.pk}/send", {"to": ["x@example.com"], "subject": "s", "text": "t"}
    ).json()["id"]
    outcomes: list[str] = []
    user = UserFactory()

    def approve() -> None:
        try:
            services.decide(
                item=OutboxItem.objects.get(pk=item_id),
                user=user,
                role="owner",
                decision="approve",
                by=Actor.system("tests"),
            )
            outcomes.append("won")
        except InvalidState:
            outcomes.append("409")
        finally:
            connection.close()

    threads = [threading.Thread(target=approve) for _ in range(10)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == ["409"] * 9 + ["won"]
    assert len(sink.received) == 1
    assert outbound_events(item_id) == ["outbound.pending", "outbound.sent"]


def test_sweeper_does_not_multiply_a_backlog(api: Api, inbox: Inbox, settings: Any) -> None:
    """With a broker, the sweeper queues an item again only when its task is not waiting in the
    broker and had a grace period to reach a worker, and then once per grace period, however
    often it runs (the engine of config.work, as for webhook deliveries)."""
    import uuid

    from config.celery import app

    grace = timedelta(seconds=settings.OUTBOX_SWEEP_GRACE)
    queue = f"test-sweep-{uuid.uuid4().hex[:8]}"  # nobody consumes it
    app.conf.task_always_eager, app.conf.task_default_queue = False, queue
    try:
        api.call(
            "POST",
            f"inboxes/{inbox.pk}/send",
            {"to": ["x@example.com"], "subject": "s", "text": "t"},
        )
        assert OutboxItem.objects.get().delivery == "queued"
        assert services.sweep() == 0  # its task was queued at commit and waits in the broker
        later = timezone.now() + grace + timedelta(seconds=1)
        with time_machine.travel(later, tick=False):
            assert services.sweep() == 0  # overdue, but its task still waits in the broker
            with app.connection_for_write() as conn:
                conn.default_channel.queue_purge(queue)  # the broker lost it
            assert [services.sweep(), services.sweep()] == [1, 0]
        with time_machine.travel(later + grace + timedelta(seconds=1), tick=False):
            assert services.sweep() == 0  # the task queued again waits in the broker
            with app.connection_for_write() as conn:
                conn.default_channel.queue_purge(queue)
            assert [services.sweep(), services.sweep()] == [1, 0]
    finally:
        app.conf.task_always_eager, app.conf.task_default_queue = True, "pigeonhole"
        with app.connection_for_write() as conn:
            conn.default_channel.queue_purge(queue)
            conn.default_channel.queue_delete(queue)


@pytest.mark.django_db(transaction=True)
def test_internal_copies_and_their_mark_commit_together(
    api: Api, inbox: Inbox, workspace: Workspace, sink: Sink
) -> None:
    """A failure between the internal delivery and its mark must leave neither: otherwise the
    next attempt would deliver every internal copy a second time."""
    from django.db import connection

    target = inbox_services.inbox_create(workspace=workspace, local_part="target")
    table = OutboxItem._meta.db_table
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "CREATE FUNCTION test_no_mark() RETURNS trigger AS $$ BEGIN "
                "IF NEW.internal_delivered AND NOT OLD.internal_delivered THEN "
                "RAISE EXCEPTION 'mark refused'; END IF; RETURN NEW; END $$ LANGUAGE plpgsql"
            )
            cursor.execute(
                f"CREATE TRIGGER test_no_mark BEFORE UPDATE ON {table} "
                "FOR EACH ROW EXECUTE FUNCTION test_no_mark()"
            )
        else:
            cursor.execute(
                f"CREATE TRIGGER test_no_mark BEFORE UPDATE OF internal_delivered ON {table} "
                "WHEN NEW.internal_delivered = 1 BEGIN SELECT RAISE(ABORT, 'mark refused'); END"
            )
    try:
        response = api.call(
            "POST",
            f"inboxes/{inbox.pk}/send",
            {"to": [target.address], "subject": "Once", "text": "x"},
        )
        assert response.status_code == 200
        item = OutboxItem.objects.get(pk=response.json()["id"])
        assert not item.internal_delivered
        assert Email.objects.filter(inbox=target).count() == 0  # rolled back with the mark
    finally:
        with connection.cursor() as cursor:
            cursor.execute(
                f"DROP TRIGGER test_no_mark{' ON ' + table if connection.vendor == 'postgresql' else ''}"
            )
            if connection.vendor == "postgresql":
                cursor.execute("DROP FUNCTION test_no_mark()")
    with time_machine.travel(timezone.now() + timedelta(hours=1)):  # past lease and backoff
        assert services.attempt_delivery(item.pk)
    assert Email.objects.filter(inbox=target).count() == 1
    assert OutboxItem.objects.get(pk=item.pk).internal_delivered


class _StallingRelay:
    """An SMTP relay that takes ``stall`` seconds to answer RCPT."""

    def __init__(self, stall: float) -> None:
        self.stall = stall
        self.received: list[bytes] = []

    async def handle_RCPT(self, server, session, envelope, address, options):  # type: ignore[no-untyped-def]
        import asyncio

        await asyncio.sleep(self.stall)
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server, session, envelope):  # type: ignore[no-untyped-def]
        self.received.append(envelope.original_content)
        return "250 OK"


@pytest.mark.django_db(transaction=True)
def test_an_attempt_never_outlives_its_lease(settings, api: Api, inbox: Inbox, sink: Sink) -> None:  # type: ignore[no-untyped-def]
    """A relay slower than the lease: the attempt ends before another worker could take the
    item (and send it beside this one); once the relay is quick again, it goes out once."""
    import time

    from aiosmtpd.controller import Controller

    from tests.live import free_port

    relay = _StallingRelay(stall=30)
    port = free_port()
    controller = Controller(relay, hostname="127.0.0.1", port=port)
    controller.start()
    settings.EMAIL_PORT, settings.EMAIL_TIMEOUT, settings.OUTBOX_LEASE_SECONDS = port, 60, 12
    try:
        started = time.monotonic()  # tasks run eagerly: the send makes the first attempt
        response = api.call(
            "POST",
            f"inboxes/{inbox.pk}/send",
            {"to": ["x@elsewhere.example"], "subject": "S", "text": "t"},
        )
        assert time.monotonic() - started < settings.OUTBOX_LEASE_SECONDS
        item_id = response.json()["id"]
        item = OutboxItem.objects.get(pk=item_id)
        assert item.delivery != "done" and item.attempts == 1 and item.error
        assert relay.received == []
        relay.stall = 0
        with time_machine.travel(timezone.now() + timedelta(hours=1)):
            assert services.attempt_delivery(item_id)
        assert len(relay.received) == 1
    finally:
        controller.stop()

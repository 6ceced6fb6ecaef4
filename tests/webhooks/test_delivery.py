"""Delivery to a real HTTP receiver on 127.0.0.1: signatures checked by Stripe's independent
verifier, headers, payloads, filters, retries on the schedule, timeouts, redirects, replay, test
events, and the lease that keeps two workers from sending one delivery at once."""

from __future__ import annotations

import json
import threading
import uuid
from datetime import timedelta

import pytest
import stripe
import time_machine
from django.db import connection
from django.utils import timezone

from apikeys.models import Workspace
from inboxes import services as inbox_services
from inboxes.models import Inbox
from labels.models import Label
from mail import pipeline
from tests.conftest import Api
from tests.mail.messages import message
from tests.webhooks.receiver import Receiver
from webhooks import services
from webhooks.models import Delivery

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _local_receivers(settings) -> None:  # type: ignore[no-untyped-def]
    settings.WEBHOOK_ALLOW_PRIVATE_TARGETS = True
    settings.WEBHOOK_RETRY_SCHEDULE = [1, 1, 1]
    settings.WEBHOOK_TIMEOUT = 2.0


@pytest.fixture
def inbox(workspace: Workspace) -> Inbox:
    return inbox_services.inbox_create(workspace=workspace, local_part="hooked")


def endpoint(api: Api, receiver: Receiver, **fields: object) -> dict:
    body = api.call("POST", "webhooks", {"url": receiver.url, **fields})
    assert body.status_code == 200, body.content
    return body.json()


def attempt_in_thread(delivery_id: str, results: list[object]) -> threading.Thread:
    """Starts ``services.attempt`` in a thread of its own (with its own database connection),
    appending what it returns to ``results``."""

    def run() -> None:
        try:
            results.append(services.attempt(delivery_id))
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def deliver_due() -> int:
    """What a worker does: attempt every due delivery."""
    return sum(services.attempt(d) is not None for d in services.DELIVERIES.due())


def test_email_received_signed_and_shaped(api: Api, receiver: Receiver, inbox: Inbox) -> None:
    hook = endpoint(api, receiver)
    delivery_id = None
    email_id = pipeline.receive_one(
        message(
            to=inbox.address,
            sender="otp@bank.example",
            sender_name="Bank",
            subject="Your code is 551203",
            text="Your verification code is 551203.",
        ),
        to=inbox.address,
    ).email_id
    assert deliver_due() == 1
    request = receiver.wait_for(1)[0]
    payload = json.loads(request.body)
    header = request.headers["Service-Signature"]
    stripe.WebhookSignature.verify_header(request.body.decode(), header, hook["secret"], 300)
    with pytest.raises(stripe.SignatureVerificationError):
        stripe.WebhookSignature.verify_header(
            request.body.decode() + " ", header, hook["secret"], 300
        )
    with pytest.raises(stripe.SignatureVerificationError):
        stripe.WebhookSignature.verify_header(request.body.decode(), header, "whsec_wrong", 300)
    delivery_id = payload["id"]
    assert delivery_id.startswith("dlv_")
    assert request.headers["Service-Event"] == "email.received"
    assert request.headers["Service-Delivery"] == delivery_id
    assert request.headers["User-Agent"].startswith("Pigeonhole-Webhooks/")
    assert request.headers["Content-Type"] == "application/json"
    assert set(payload) == {"id", "type", "created_at", "data"}
    assert payload["type"] == "email.received" and payload["created_at"].endswith("Z")
    assert payload["data"]["inbox"] == {"id": inbox.pk, "address": inbox.address}
    email = payload["data"]["email"]
    assert set(email) == {
        "id",
        "from",
        "subject",
        "snippet",
        "labels",
        "verification",
        "received_at",
        "authentication",
    }
    assert email["authentication"] is None  # not received over SMTP: not checked
    assert email["id"] == email_id and email["from"] == {
        "address": "otp@bank.example",
        "name": "Bank",
    }
    assert email["verification"] == {"code": "551203", "link": None}
    assert email["snippet"] == "Your verification code is 551203." and email["labels"] == []
    assert Delivery.objects.get(pk=delivery_id).status == "succeeded"
    log = api.call("GET", f"webhooks/{hook['id']}/deliveries").json()["data"]
    assert log[0]["id"] == delivery_id and log[0]["status"] == "succeeded"
    assert log[0]["attempts"][0]["status_code"] == 200 and log[0]["payload"] == payload


def test_filters(api: Api, receiver: Receiver, inbox: Inbox, workspace: Workspace) -> None:
    other = inbox_services.inbox_create(workspace=workspace, local_part="other")
    Label.objects.create(
        workspace=workspace,
        key="bank",
        name="Bank",
        rules={
            "match": "any",
            "conditions": [
                {
                    "field": "from",
                    "op": "domain",
                    "value": "bank.example",
                    "name": "",
                    "negate": False,
                }
            ],
        },
    )
    only_created = endpoint(api, receiver, events=["inbox.created"])
    only_other = endpoint(api, receiver, inbox_ids=[other.pk])
    only_bank = endpoint(
        api, receiver, events=["email.received", "email.labeled"], label_keys=["bank"]
    )
    pipeline.receive_one(message(to=inbox.address, sender="a@shop.example"), to=inbox.address)
    pipeline.receive_one(message(to=inbox.address, sender="a@bank.example"), to=inbox.address)
    pipeline.receive_one(message(to=other.address, sender="a@shop.example"), to=other.address)
    inbox_services.inbox_create(workspace=workspace, local_part="third")
    deliver_due()
    by_endpoint: dict[str, list[str]] = {}
    for delivery in Delivery.objects.all():
        by_endpoint.setdefault(delivery.endpoint_id, []).append(delivery.event)
    assert by_endpoint[only_created["id"]] == ["inbox.created"]
    assert by_endpoint[only_other["id"]] == ["email.received"]
    assert sorted(by_endpoint[only_bank["id"]]) == ["email.labeled", "email.received"]
    assert len(receiver.requests) == 4


def test_retry_on_schedule_then_success(api: Api, receiver: Receiver, workspace: Workspace) -> None:
    hook = endpoint(api, receiver, events=["inbox.created"])
    receiver.script = [(500, 0.0), (200, 0.0)]
    inbox_services.inbox_create(workspace=workspace, local_part="retry")
    assert deliver_due() == 1
    delivery = Delivery.objects.get()
    assert delivery.status == "retrying" and delivery.attempt_count == 1
    first = delivery.attempts.get()
    failed_at = first.at + timedelta(milliseconds=first.duration_ms)
    wait = (delivery.next_attempt_at - failed_at).total_seconds()
    assert 0.9 <= wait <= 1.1  # from the failure: the schedule's first step, 1 s ± 10 % jitter
    assert deliver_due() == 0  # not due yet
    with time_machine.travel(timezone.now() + timedelta(seconds=2), tick=True):
        assert deliver_due() == 1
    delivery.refresh_from_db()
    assert delivery.status == "succeeded" and delivery.attempt_count == 2
    attempts = api.call("GET", f"webhooks/{hook['id']}/deliveries").json()["data"][0]["attempts"]
    assert [a["status_code"] for a in attempts] == [500, 200]
    assert attempts[0]["error"] == "HTTP 500" and attempts[0]["response_excerpt"] == "ok"
    first, second = receiver.requests
    assert first.headers["Service-Delivery"] == second.headers["Service-Delivery"]
    assert first.body == second.body


def test_failed_after_last_retry_then_replay(
    settings, api: Api, receiver: Receiver, workspace: Workspace
) -> None:  # type: ignore[no-untyped-def]
    settings.WEBHOOK_RETRY_SCHEDULE = [1]
    hook = endpoint(api, receiver, events=["inbox.created"])
    receiver.default = (503, 0.0)
    inbox_services.inbox_create(workspace=workspace, local_part="doomed")
    deliver_due()
    with time_machine.travel(timezone.now() + timedelta(seconds=2), tick=True):
        deliver_due()
    delivery = Delivery.objects.get()
    assert delivery.status == "failed" and delivery.attempt_count == 2
    assert deliver_due() == 0
    receiver.default = (200, 0.0)
    replayed = api.call("POST", f"webhooks/{hook['id']}/deliveries/{delivery.pk}/replay").json()
    assert replayed["id"] == delivery.pk and replayed["status"] == "pending"
    assert deliver_due() == 1
    delivery.refresh_from_db()
    assert delivery.status == "succeeded"
    assert len(receiver.requests) == 3
    assert receiver.requests[2].body == receiver.requests[0].body
    assert receiver.requests[2].headers["Service-Delivery"] == delivery.pk


def test_timeout_counts_as_failure(api: Api, receiver: Receiver, workspace: Workspace) -> None:
    endpoint(api, receiver, events=["inbox.created"])
    receiver.script = [(200, 3.0)]  # sleeps past WEBHOOK_TIMEOUT (2 s)
    inbox_services.inbox_create(workspace=workspace, local_part="slow")
    deliver_due()
    attempt = Delivery.objects.get().attempts.get()
    assert attempt.status_code is None and attempt.error == "timeout after 2 s"
    assert Delivery.objects.get().status == "retrying"


def test_redirects_are_failures_and_not_followed(
    api: Api, receiver: Receiver, workspace: Workspace
) -> None:
    endpoint(api, receiver, events=["inbox.created"])
    receiver.script = [(302, 0.0)]
    inbox_services.inbox_create(workspace=workspace, local_part="moved")
    deliver_due()
    attempt = Delivery.objects.get().attempts.get()
    assert attempt.status_code == 302 and "not followed" in attempt.error
    assert [r.path for r in receiver.requests] == ["/hook"]  # /elsewhere never contacted


def test_test_event(api: Api, receiver: Receiver) -> None:
    hook = endpoint(api, receiver, events=["inbox.expired"])
    created = api.call("POST", f"webhooks/{hook['id']}/test").json()
    assert created["event"] == "webhook.test" and created["status"] == "pending"
    deliver_due()
    request = receiver.wait_for(1)[0]
    assert request.headers["Service-Event"] == "webhook.test"
    payload = json.loads(request.body)
    assert payload["type"] == "webhook.test" and payload["data"]["endpoint"]["id"] == hook["id"]
    stripe.WebhookSignature.verify_header(
        request.body.decode(), request.headers["Service-Signature"], hook["secret"], 300
    )
    log = api.call("GET", f"webhooks/{hook['id']}/deliveries").json()["data"]
    assert log[0]["status"] == "succeeded"


@pytest.mark.django_db(transaction=True)
def test_one_attempt_at_a_time(api: Api, receiver: Receiver, workspace: Workspace) -> None:
    endpoint(api, receiver, events=["inbox.created"])
    receiver.default = (200, 0.5)
    inbox_services.inbox_create(workspace=workspace, local_part="race")
    delivery_id = services.DELIVERIES.due()[0]
    results: list[object] = []
    threads = [attempt_in_thread(delivery_id, results) for _ in range(4)]
    for thread in threads:
        thread.join()
    assert sum(r is not None for r in results) == 1
    assert len(receiver.requests) == 1 and receiver.overlaps == 0


@pytest.mark.django_db(transaction=True)
def test_an_endpoint_deleted_during_an_attempt_ends_it_quietly(
    api: Api, receiver: Receiver, workspace: Workspace
) -> None:
    """An endpoint deleted while its delivery is attempted (the schema fuzzer deletes webhooks
    while embedded mode's sweeper attempts deliveries): the attempt raised when it recorded the
    outcome on the log row the deletion had taken with it."""
    hook = endpoint(api, receiver, events=["inbox.created"])
    receiver.default = (200, 1.0)
    inbox_services.inbox_create(workspace=workspace, local_part="vanishing")
    delivery_id = services.DELIVERIES.due()[0]
    results: list[object] = []
    thread = attempt_in_thread(delivery_id, results)
    receiver.wait_for(1)  # the request is out; the receiver holds it for a second
    assert api.call("DELETE", f"webhooks/{hook['id']}").status_code == 200
    thread.join()
    assert len(results) == 1  # returned, no exception
    assert not Delivery.objects.filter(pk=delivery_id).exists()
    assert services.attempt(delivery_id) is None


@pytest.mark.django_db(transaction=True)
def test_a_stale_attempt_never_overwrites_the_attempt_that_took_over(
    api: Api, receiver: Receiver, workspace: Workspace
) -> None:
    """A worker that outlives its lease (here: the second attempt runs on a clock moved past
    it) loses the row: only the lease holder records an outcome."""
    endpoint(api, receiver, events=["inbox.created"])
    receiver.script = [(500, 1.5), (200, 0.0)]  # the first is still in flight when the second ends
    inbox_services.inbox_create(workspace=workspace, local_part="stale")
    delivery_id = services.DELIVERIES.due()[0]
    results: list[object] = []
    thread = attempt_in_thread(delivery_id, results)  # the stale one
    receiver.wait_for(1)
    later = timezone.now() + services.DELIVERIES.lease() + timedelta(seconds=1)
    assert services.attempt(delivery_id, now=later) is not None
    thread.join()
    delivery = Delivery.objects.get()
    assert delivery.status == "succeeded" and delivery.attempt_count == 1
    assert delivery.leased_until is None and delivery.lease_token == ""
    statuses = sorted(a.status_code for a in delivery.attempts.all())
    assert statuses == [200, 500]  # both requests are in the log


def test_the_sweeper_requeues_what_the_broker_lost_once_per_grace(
    settings, api: Api, receiver: Receiver, workspace: Workspace
) -> None:  # type: ignore[no-untyped-def]
    from config.celery import app

    endpoint(api, receiver, events=["inbox.created"])
    inbox_services.inbox_create(workspace=workspace, local_part="swept")
    settings.WEBHOOK_SWEEP_GRACE = 10.0
    queued, previous = [], (app.conf.task_always_eager, app.conf.task_default_queue)
    # A broker (the sweeper queues instead of attempting), on a queue of this test's own.
    app.conf.task_always_eager, app.conf.task_default_queue = False, f"test-{uuid.uuid4().hex}"
    try:
        with time_machine.travel(timezone.now() + timedelta(seconds=5), tick=False):
            queued.append(services.sweep())  # inside the grace: its task may still arrive
        with time_machine.travel(timezone.now() + timedelta(seconds=11), tick=False):
            queued.append(services.sweep())
            queued.append(services.sweep())  # the grace started again
        with time_machine.travel(timezone.now() + timedelta(seconds=22), tick=False):
            queued.append(services.sweep())  # its task waits in the queue: not lost
            with app.connection_for_write() as conn:
                conn.default_channel.queue_purge(app.conf.task_default_queue)  # now it is
            queued.append(services.sweep())
    finally:
        with app.connection_for_write() as conn:
            conn.default_channel.queue_delete(app.conf.task_default_queue)
        app.conf.task_always_eager, app.conf.task_default_queue = previous
    assert queued == [0, 1, 0, 0, 1]
    assert Delivery.objects.get().status == "pending"


@pytest.mark.django_db(transaction=True)
def test_the_sweeper_requeues_an_expired_lease_at_once(
    api: Api, receiver: Receiver, workspace: Workspace
) -> None:
    from config.celery import app

    endpoint(api, receiver, events=["inbox.created"])
    inbox_services.inbox_create(workspace=workspace, local_part="orphan")
    delivery = Delivery.objects.get()
    leased = timezone.now() - timedelta(seconds=1)  # a worker died holding it
    Delivery.objects.filter(pk=delivery.pk).update(leased_until=leased, lease_token="dead")
    previous = (app.conf.task_always_eager, app.conf.task_default_queue)
    app.conf.task_always_eager, app.conf.task_default_queue = False, f"test-{uuid.uuid4().hex}"
    try:
        assert services.sweep() == 1
        assert services.sweep() == 0  # once: the lease is cleared
    finally:
        with app.connection_for_write() as conn:
            conn.default_channel.queue_delete(app.conf.task_default_queue)
        app.conf.task_always_eager, app.conf.task_default_queue = previous
    delivery.refresh_from_db()
    assert delivery.leased_until is None and delivery.lease_token == ""


def test_private_target_refused_at_send_time(
    settings, api: Api, receiver: Receiver, workspace: Workspace
) -> None:  # type: ignore[no-untyped-def]
    endpoint(api, receiver, events=["inbox.created"])
    settings.WEBHOOK_ALLOW_PRIVATE_TARGETS = False  # e.g. the name now resolves elsewhere
    inbox_services.inbox_create(workspace=workspace, local_part="ssrf")
    deliver_due()
    attempt = Delivery.objects.get().attempts.get()
    assert attempt.status_code is None and attempt.error.startswith("refused:")
    assert receiver.requests == []


def test_an_event_that_names_an_inbox_is_filtered_by_it(
    api: Api, receiver: Receiver, workspace: Workspace, inbox: Inbox
) -> None:
    """Whoever emits it, an event whose data names an inbox carries that inbox's id (the field
    the inbox filter reads) and joins its chain, even when the emitter did not pass it."""
    from events import services as events

    other = inbox_services.inbox_create(workspace=workspace, local_part="unhooked")
    limited = endpoint(api, receiver, events=["inbox.expired"], inbox_ids=[inbox.pk])
    emitted = [
        events.emit(
            workspace_id=workspace.pk,
            type="inbox.expired",
            data={"inbox": {"id": target.pk, "address": target.address}},
        )
        for target in (inbox, other)
    ]
    assert [event.inbox_id for event in emitted] == [inbox.pk, other.pk]
    assert emitted[0].prev_id is not None  # after the inbox's inbox.created
    rows = Delivery.objects.filter(endpoint_id=limited["id"])
    assert [json.loads(row.body)["data"]["inbox"]["id"] for row in rows] == [inbox.pk]

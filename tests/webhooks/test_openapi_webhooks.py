"""The OpenAPI document's ``webhooks`` section against the requests a real receiver gets (issue
25, item 11).

A live server (daphne and ``manage.py smtpd``, or ``manage.py serve`` in embedded mode) with an
outbound relay on 127.0.0.1 that refuses every recipient: the events are caused through its API,
SMTP and dashboard session (every type the section lists: mail received and labelled, inboxes
created, expired and deleted, outgoing mail pending, sent, rejected and failed, a test event), the
deliveries are attempted to a real HTTP receiver on 127.0.0.1, and every body is validated with
a JSON Schema validator against the payload schema the live server's own document gives for its
event, every header against the documented header parameters, every signature by the documented
rule.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import smtplib
import time
from collections.abc import Iterator
from datetime import timedelta
from email.message import EmailMessage
from typing import Any

import httpx
import jsonschema
import pytest
from aiosmtpd.controller import Controller
from django.utils import timezone

from apikeys import services as key_services
from apikeys.audit import Actor
from apikeys.models import Workspace
from inboxes import services as inbox_services
from tests.live import Stack, free_port, signed_in
from tests.webhooks.receiver import Receiver
from webhooks import services

PASSWORD = "webhook-schema-password-3"
OWNER = "owner@webhook-schema.test"


class RefusingRelay:
    """The outbound relay: refuses every recipient for good, so approved mail fails."""

    async def handle_RCPT(self, server, session, envelope, address, options) -> str:  # type: ignore[no-untyped-def]
        return "550 5.1.1 No such user here"


@pytest.fixture(scope="module")
def stack(django_db_setup: None, django_db_blocker: Any) -> Iterator[Stack]:
    from django.db import connection

    relay_port = free_port()
    relay = Controller(RefusingRelay(), hostname="127.0.0.1", port=relay_port)
    relay.start()
    running = Stack(connection.settings_dict["NAME"])
    for process in {id(p): p for p in (running.web, running.smtp)}.values():
        process.env["WEBHOOK_ALLOW_PRIVATE_TARGETS"] = "true"  # the receiver is on 127.0.0.1
        process.env["EMAIL_URL"] = f"smtp://127.0.0.1:{relay_port}"
        process.env.pop("EMAIL_BACKEND", None)
        process.env["OUTBOX_CAPTURE"] = "false"
    running.start()
    yield running
    running.stop()
    relay.stop()


@pytest.fixture(autouse=True)
def _local_receivers(settings) -> None:  # type: ignore[no-untyped-def]
    settings.WEBHOOK_ALLOW_PRIVATE_TARGETS = True  # this process makes the attempts


def send_mail(stack: Stack, to: str, subject: str) -> None:
    message = EmailMessage()
    message["From"] = "Bank <otp@bank.example>"
    message["To"] = to
    message["Subject"] = subject
    message.set_content(f"{subject}. Your verification code is 551203.\n")
    with smtplib.SMTP("127.0.0.1", stack.smtp_port, timeout=30) as smtp:
        smtp.send_message(message)


def received_types(receiver: Receiver) -> set[str]:
    return {request.headers["Service-Event"] for request in receiver.requests}


def deliver_until(receiver: Receiver, wanted: set[str], seconds: float = 60) -> None:
    """What a worker does, until every wanted event type has arrived (or ``seconds`` pass)."""
    deadline = time.monotonic() + seconds
    while not wanted <= received_types(receiver) and time.monotonic() < deadline:
        for delivery_id in services.DELIVERIES.due():
            services.attempt(delivery_id)
        time.sleep(0.2)


def test_the_webhooks_section_describes_every_payload_a_receiver_gets(
    stack: Stack, transactional_db: None, workspace: Workspace, receiver: Receiver
) -> None:
    admin = key_services.api_key_create(
        workspace=workspace, name="admin", scopes=["admin"], by=Actor.system("tests")
    ).plain
    agent = key_services.api_key_create(
        workspace=workspace,
        name="agent",
        scopes=["read", "send"],
        require_approval=True,
        by=Actor.system("tests"),
    ).plain
    owner = key_services.user_get_or_create(email=OWNER, password=PASSWORD)
    key_services.membership_set(
        workspace=workspace, user=owner, role="owner", by=Actor.system("tests")
    )
    document = httpx.get(stack.base_url + "/api/openapi.json").raise_for_status().json()
    documented = set(document["webhooks"])

    with stack.client(admin) as client, stack.client(agent) as agent_client:
        events = [event for event in documented if event != "webhook.test"]
        hook = client.post("webhooks", json={"url": receiver.url, "events": events})
        assert hook.status_code == 200, hook.text
        secret = hook.json()["secret"]
        rules = {"conditions": [{"field": "subject", "op": "contains", "value": "code"}]}
        label = client.post("labels", json={"key": "otp", "name": "OTP", "rules": rules})
        assert label.status_code == 200, label.text

        inbox = client.post("inboxes", json={"local_part": "hooked"}).json()  # inbox.created
        send_mail(stack, inbox["address"], "Your code")  # email.received, email.labeled
        client.post("inboxes", json={"ttl_minutes": 1}).raise_for_status()
        # The expiry sweep, run as beat runs it, two minutes on: inbox.expired.
        assert inbox_services.inboxes_expire_due(now=timezone.now() + timedelta(minutes=2)) == 1
        gone = client.post("inboxes", json={"local_part": "gone"}).json()
        assert client.delete(f"inboxes/{gone['id']}").status_code == 200  # inbox.deleted

        mail = {"to": ["someone@elsewhere.example"], "subject": "Hello", "text": "Hi."}
        first = agent_client.post(f"inboxes/{inbox['id']}/send", json=mail)  # outbound.pending
        second = agent_client.post(f"inboxes/{inbox['id']}/send", json=mail)
        assert (first.status_code, second.status_code) == (202, 202), first.text
        with signed_in(stack.base_url, OWNER, PASSWORD) as session:
            for item, decision in ((first, "approve"), (second, "reject")):
                decided = session.post(
                    f"/api/v1/outbox/{item.json()['id']}/decision", json={"decision": decision}
                )
                assert decided.status_code == 200, decided.text
        # approve: outbound.sent, then outbound.failed (the relay refuses); reject: rejected
        assert client.post(f"webhooks/{hook.json()['id']}/test").status_code == 200

    deliver_until(receiver, documented)
    assert received_types(receiver) == documented
    assert documented == {
        "email.received",
        "email.labeled",
        "inbox.created",
        "inbox.expired",
        "inbox.deleted",
        "outbound.pending",
        "outbound.sent",
        "outbound.rejected",
        "outbound.failed",
        "webhook.test",
    }
    for request in receiver.requests:
        event = request.headers["Service-Event"]
        operation = document["webhooks"][event]["post"]
        schema = operation["requestBody"]["content"]["application/json"]["schema"]
        payload = json.loads(request.body)
        validate({**schema, "components": document["components"]}, payload, event)
        for parameter in operation["parameters"]:
            assert parameter["in"] == "header"
            validate(parameter["schema"], request.headers[parameter["name"]], parameter["name"])
        assert request.headers["Service-Delivery"] == payload["id"]
        fields = dict(
            part.split("=", 1) for part in request.headers["Service-Signature"].split(",")
        )
        signed = f"{fields['t']}.".encode() + request.body
        expected = hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()
        assert hmac.compare_digest(expected, fields["v1"]), event


def validate(schema: dict[str, Any], instance: Any, what: str) -> None:
    validator = jsonschema.Draft202012Validator(
        schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
    )
    problems = [
        f"{'/'.join(map(str, error.absolute_path))}: {error.message}"
        for error in validator.iter_errors(instance)
    ]
    assert not problems, (what, problems, instance)

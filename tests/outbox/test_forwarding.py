"""``forward_to`` and the outbound events' inbox filter, over the real protocols (issue 23, items
2 and 5): the API over HTTP against the live web process, mail into the live smtpd with
``smtplib``, the outgoing relay a real SMTP receiver on 127.0.0.1, decisions by an owner's
dashboard session, webhooks to a real HTTP receiver on 127.0.0.1.

- Setting or changing ``forward_to`` to an address outside the workspace's domains takes the
  ``send`` scope (403 ``insufficient_scope``, path ``forward_to``); inside them ``write`` does.
- A forwarded copy goes out from the inbox's own address, the original sender in the display
  name and in ``Reply-To``, with the loop guard; never with the original ``From``.
- A copy waits for approval when the key that set forwarding requires it, when the workspace
  requires it, when that key was revoked since, when the member who set it left, or when the
  setter was never recorded (rows from before); a person's approval sends it as received
  (an edit is refused: the copy's bytes are the received message's).
- An endpoint limited to inbox A receives ``outbound.pending|sent|rejected|failed`` of A, and
  none of B's.
"""

from __future__ import annotations

import contextlib
import email
import json
import smtplib
import time
from collections.abc import Callable, Iterator
from email import policy
from email.message import EmailMessage
from typing import Any

import httpx
import pytest
from aiosmtpd.controller import Controller

from apikeys import services as key_services
from apikeys.audit import Actor
from apikeys.models import Membership, Workspace
from events.models import Event
from inboxes import services as inbox_services
from inboxes.models import Inbox
from tests.factories import MembershipFactory, UserFactory
from tests.live import Stack, free_port
from tests.webhooks.receiver import Receiver, receiver  # noqa: F401  (a fixture)
from webhooks import services as webhook_services
from webhooks.models import Delivery

pytestmark = pytest.mark.django_db(transaction=True)

PASSWORD = "correct-horse-battery"  # tests.factories.UserFactory's
VICTIM = "victim@external.test"
BOUNCE = "bounce@external.test"  # the relay refuses it for good (550)
OUTBOUND = ["outbound.pending", "outbound.sent", "outbound.rejected", "outbound.failed"]


class Relay:
    """The outgoing relay: a real SMTP receiver that records each message it accepts."""

    def __init__(self) -> None:
        self.port = free_port()
        self.received: list[tuple[str, list[str], bytes]] = []
        self.controller = Controller(self, hostname="127.0.0.1", port=self.port)

    async def handle_RCPT(  # type: ignore[no-untyped-def]
        self, server, session, envelope, address: str, options: list
    ) -> str:
        if address.lower() == BOUNCE:
            return "550 5.1.1 no such user"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server, session, envelope) -> str:  # type: ignore[no-untyped-def]
        self.received.append(
            (envelope.mail_from, list(envelope.rcpt_tos), envelope.original_content)
        )
        return "250 OK"

    def wait_for(self, count: int, timeout: float = 30) -> list[tuple[str, list[str], bytes]]:
        deadline = time.monotonic() + timeout
        while len(self.received) < count:
            assert time.monotonic() < deadline, f"{len(self.received)} of {count} relayed"
            time.sleep(0.05)
        return self.received


@pytest.fixture(scope="module")
def module_relay() -> Iterator[Relay]:
    relay = Relay()
    relay.controller.start()
    yield relay
    relay.controller.stop()


@pytest.fixture
def relay(module_relay: Relay) -> Relay:
    module_relay.received.clear()
    return module_relay


@pytest.fixture(scope="module")
def stack(django_db_setup: None, django_db_blocker, module_relay: Relay) -> Iterator[Stack]:  # type: ignore[no-untyped-def]
    from django.db import connection

    running = Stack(connection.settings_dict["NAME"])
    running.env["EMAIL_URL"] = f"smtp://127.0.0.1:{module_relay.port}"
    running.env["WEBHOOK_ALLOW_PRIVATE_TARGETS"] = "true"  # the receiver is on 127.0.0.1
    running.start()
    yield running
    running.stop()


@pytest.fixture
def key(workspace: Workspace) -> Callable[..., tuple[str, str]]:
    """(plain key, key id) of a new key of the workspace."""

    def make(*scopes: str, require_approval: bool = False) -> tuple[str, str]:
        created = key_services.api_key_create(
            workspace=workspace,
            name="k",
            scopes=list(scopes),
            require_approval=require_approval,
            by=Actor.system("tests"),
        )
        return created.plain, created.key.pk

    return make


@contextlib.contextmanager
def signed_in(stack: Stack, workspace: Workspace, role: str) -> Iterator[httpx.Client]:
    """A new member's dashboard session, signed in through ``/login/``, sending its CSRF token."""
    user = UserFactory()
    MembershipFactory(workspace=workspace, user=user, role=role)
    with httpx.Client(base_url=stack.base_url, timeout=httpx.Timeout(60, connect=5)) as client:
        client.get("/login/").raise_for_status()
        response = client.post(
            "/login/",
            data={
                "username": user.get_username(),
                "password": PASSWORD,
                "csrfmiddlewaretoken": client.cookies["csrftoken"],
            },
        )
        assert response.status_code == 302, response.text[:300]
        client.headers["X-CSRFToken"] = client.cookies["csrftoken"]
        client.headers["Referer"] = stack.base_url + "/"
        client.user = user  # type: ignore[attr-defined]
        yield client


@pytest.fixture
def owner(stack: Stack, workspace: Workspace) -> Iterator[httpx.Client]:
    with signed_in(stack, workspace, "owner") as client:
        yield client


def error_of(response: httpx.Response) -> tuple[int, str | None]:
    return response.status_code, response.json().get("error", {}).get("code")


def mail_in(stack: Stack, to: str, subject: str) -> bytes:
    """A message from "Your Bank" into the live smtpd; returns its bytes."""
    msg = EmailMessage()
    msg["From"] = "Your Bank <security@bank.example>"
    msg["To"] = to
    msg["Subject"] = subject
    msg["Message-ID"] = f"<{subject.replace(' ', '-')}@bank.example>"
    msg["Reply-To"] = "Collections <pay@bank.example>"
    msg["DKIM-Signature"] = "v=1; a=rsa-sha256; d=bank.example; s=s1; b=c2lnbmF0dXJl"
    msg.set_content(f"Please confirm your account: {subject}.\n")
    raw = msg.as_bytes(policy=policy.SMTP)
    with smtplib.SMTP("127.0.0.1", stack.smtp_port, timeout=30) as smtp:
        smtp.sendmail("security@bank.example", [to], raw)
    return raw


def outbox_of(http: httpx.Client, inbox_id: str) -> list[dict]:
    """The inbox's outbox items, through GET /outbox."""
    response = http.get("outbox", params={"limit": 200})
    assert response.status_code == 200, response.text
    return [item for item in response.json()["data"] if item["inbox_id"] == inbox_id]


def assert_forwarded_copy(
    relayed: tuple[str, list[str], bytes], inbox_address: str, subject: str
) -> None:
    mail_from, rcpts, raw = relayed
    assert mail_from == inbox_address and rcpts == [VICTIM]
    copy = email.message_from_bytes(raw, policy=policy.default)
    (sender,) = copy["From"].addresses
    assert sender.addr_spec == inbox_address  # never the original From
    assert sender.display_name == "Your Bank <security@bank.example> via Pigeonhole"
    (reply_to,) = copy["Reply-To"].addresses
    assert (reply_to.display_name, reply_to.addr_spec) == ("Your Bank", "security@bank.example")
    assert copy["X-Pigeonhole-Forwarded-By"] == inbox_address  # the loop guard
    assert copy["DKIM-Signature"] is None and copy["Sender"] is None
    assert copy["Subject"] == subject and copy["To"] == inbox_address
    assert copy.get_content().strip() == f"Please confirm your account: {subject}."


# --- item 2: who may set forward_to ------------------------------------------------------------


def test_forwarding_outside_our_domains_needs_send(
    stack: Stack, workspace: Workspace, other_workspace: Workspace, key: Callable[..., Any]
) -> None:
    inbox_services.domain_add(
        workspace=workspace, domain="ours.example", verified=True, by=Actor.system("tests")
    )
    inbox_services.domain_add(
        workspace=other_workspace, domain="theirs.example", verified=True, by=Actor.system("tests")
    )
    # A claim nobody has proved (anyone may type gmail.com) is not one of our domains.
    inbox_services.domain_add(
        workspace=workspace, domain="claimed.example", by=Actor.system("tests")
    )
    writer, writer_id = key("read", "write")
    with stack.client(writer) as http:
        refused = http.post("inboxes", json={"local_part": "fwd-out", "forward_to": VICTIM})
        assert error_of(refused) == (403, "insufficient_scope"), refused.text
        issue = refused.json()["error"]["issues"][0]
        assert issue["path"] == "forward_to" and "'send'" in issue["message"]
        assert not Inbox.objects.filter(local_part="fwd-out").exists()
        # Another workspace's custom domain is outside ours, though this instance hosts it.
        other = http.post("inboxes", json={"forward_to": "someone@theirs.example"})
        assert error_of(other) == (403, "insufficient_scope")
        claimed = http.post("inboxes", json={"forward_to": "victim@claimed.example"})
        assert error_of(claimed) == (403, "insufficient_scope"), claimed.text
        # Inside our own domains (shared and custom) write is enough.
        shared = http.post(
            "inboxes", json={"local_part": "fwd-in", "forward_to": "a@pigeonhole.test"}
        )
        custom = http.post("inboxes", json={"forward_to": "b@ours.example"})
        assert shared.status_code == 200 and custom.status_code == 200, (shared.text, custom.text)
        inbox_id = shared.json()["id"]
        changed = http.patch(f"inboxes/{inbox_id}", json={"forward_to": VICTIM})
        assert error_of(changed) == (403, "insufficient_scope")
        assert changed.json()["error"]["issues"][0]["path"] == "forward_to"
        kept = Inbox.objects.get(pk=inbox_id)
        assert kept.forward_to == "a@pigeonhole.test"
        assert (kept.forward_set_via, kept.forward_set_by_key_id) == ("api_key", writer_id)
        # Unchanged forward_to, or other fields only: no send needed.
        same = http.patch(f"inboxes/{inbox_id}", json={"forward_to": "a@pigeonhole.test"})
        renamed = http.patch(f"inboxes/{inbox_id}", json={"name": "Renamed"})
        assert same.status_code == 200 and renamed.status_code == 200
    sender, sender_id = key("write", "send")
    with stack.client(sender) as http:
        allowed = http.patch(f"inboxes/{inbox_id}", json={"forward_to": VICTIM})
        assert allowed.status_code == 200 and allowed.json()["forward_to"] == VICTIM
        created = http.post("inboxes", json={"forward_to": VICTIM})
        assert created.status_code == 200, created.text
    moved = Inbox.objects.get(pk=inbox_id)
    assert (moved.forward_set_via, moved.forward_set_by_key_id) == ("api_key", sender_id)
    with stack.client(writer) as http:  # given unchanged by a key that may not set it
        same = http.patch(f"inboxes/{inbox_id}", json={"forward_to": VICTIM, "name": "Again"})
        assert same.status_code == 200 and same.json()["name"] == "Again"
    kept = Inbox.objects.get(pk=inbox_id)
    assert (kept.forward_set_via, kept.forward_set_by_key_id) == ("api_key", sender_id)


# --- item 2: what goes out, and when it waits ---------------------------------------------------


def test_forwarded_copy_goes_out_from_the_inbox(
    stack: Stack, relay: Relay, key: Callable[..., Any]
) -> None:
    admin, _ = key("admin")
    with stack.client(admin) as http:
        inbox = http.post("inboxes", json={"local_part": "fwd-bank", "forward_to": VICTIM}).json()
        raw = mail_in(stack, inbox["address"], "Account locked")
        (relayed,) = relay.wait_for(1)
        assert_forwarded_copy(relayed, inbox["address"], "Account locked")
        assert b"From: Your Bank <security@bank.example>" in raw
        assert b"From: Your Bank <security@bank.example>" not in relayed[2]
        (item,) = outbox_of(http, inbox["id"])
        assert item["status"] == "sent" and item["approval_required"] is False
        assert item["from"]["address"] == inbox["address"] and item["to"] == [VICTIM]


APPROVAL_CASES = [
    "key_requires_approval",
    "workspace_requires_approval",
    "setter_key_revoked",
    "setter_member_left",
    "set_before_setter_recorded",
]


@pytest.mark.parametrize("case", APPROVAL_CASES)
def test_forwarded_copy_waits_for_approval(
    case: str,
    stack: Stack,
    relay: Relay,
    workspace: Workspace,
    key: Callable[..., Any],
    owner: httpx.Client,
) -> None:
    admin, _ = key("admin")
    setter, setter_id = key("write", "send", require_approval=case == "key_requires_approval")
    body = {"local_part": f"fwd-{case.replace('_', '-')}", "forward_to": VICTIM}
    if case == "setter_member_left":  # set by a member through the API with their session
        with signed_in(stack, workspace, "member") as member:
            created = member.post("/api/v1/inboxes", json=body)
            Membership.objects.filter(workspace=workspace, user=member.user).delete()
    else:
        with stack.client(setter) as http:
            created = http.post("inboxes", json=body)
    assert created.status_code == 200, created.text
    inbox = created.json()
    if case == "workspace_requires_approval":  # switched on after forwarding was set
        workspace.require_approval = True
        workspace.save(update_fields=["require_approval"])
    elif case == "setter_key_revoked":
        with stack.client(admin) as http:
            assert http.delete(f"keys/{setter_id}").status_code == 200
    elif case == "set_before_setter_recorded":  # a row from before setters were recorded
        Inbox.objects.filter(pk=inbox["id"]).update(forward_set_via="", forward_set_by_key=None)
    mail_in(stack, inbox["address"], f"Wire transfer {case}")
    with stack.client(admin) as http:
        (item,) = outbox_of(http, inbox["id"])
        assert item["status"] == "pending" and item["approval_required"] is True, item
        assert item["from"]["address"] == inbox["address"] and item["to"] == [VICTIM]
        assert relay.received == []  # nothing left before a person decided
        decision = f"/api/v1/outbox/{item['id']}/decision"
        edited = owner.post(decision, json={"decision": "approve", "text": "Pay here instead"})
        assert error_of(edited) == (400, "validation_error")  # a forward is sent as received
        decided = owner.post(decision, json={"decision": "approve"})
        assert decided.status_code == 200 and decided.json()["status"] == "sent", decided.text
        (relayed,) = relay.wait_for(1)
        assert_forwarded_copy(relayed, inbox["address"], f"Wire transfer {case}")
    types = [e.type for e in Event.objects.filter(inbox_id=inbox["id"]).order_by("id")]
    assert types[-2:] == ["outbound.pending", "outbound.sent"]


# --- item 5: the inbox filter of webhook endpoints -----------------------------------------------


def test_inbox_filter_applies_to_outbound_events(
    stack: Stack,
    relay: Relay,
    receiver: Receiver,  # noqa: F811
    key: Callable[..., Any],
    owner: httpx.Client,
    settings,  # type: ignore[no-untyped-def]
) -> None:
    settings.WEBHOOK_ALLOW_PRIVATE_TARGETS = True  # this process attempts deliveries too
    admin, _ = key("admin")
    gated, _ = key("send", require_approval=True)
    with stack.client(admin) as http:
        a = http.post("inboxes", json={"local_part": "hook-a"}).json()
        b = http.post("inboxes", json={"local_part": "hook-b"}).json()
        endpoint = http.post(
            "webhooks", json={"url": receiver.url, "events": OUTBOUND, "inbox_ids": [a["id"]]}
        )
        assert endpoint.status_code == 200, endpoint.text
        endpoint_id = endpoint.json()["id"]
        for inbox in (a, b):
            mail = {"to": ["someone@external.test"], "subject": "s", "text": "t"}
            assert http.post(f"inboxes/{inbox['id']}/send", json=mail).json()["status"] == "sent"
            bounced = http.post(f"inboxes/{inbox['id']}/send", json={**mail, "to": [BOUNCE]})
            bounce_id = bounced.json()["id"]
            deadline = time.monotonic() + 30
            while http.get(f"outbox/{bounce_id}").json()["status"] != "failed":
                assert time.monotonic() < deadline, "the refused send did not fail"
                time.sleep(0.1)
    with stack.client(gated) as http:
        for inbox in (a, b):
            mail = {"to": ["someone@external.test"], "subject": "gated", "text": "t"}
            item = http.post(f"inboxes/{inbox['id']}/send", json=mail).json()
            assert item["status"] == "pending"
            rejected = owner.post(
                f"/api/v1/outbox/{item['id']}/decision", json={"decision": "reject"}
            )
            assert rejected.json()["status"] == "rejected"
    # A's five events and none of B's are the endpoint's deliveries, made with the events.
    rows = list(Delivery.objects.filter(endpoint_id=endpoint_id).order_by("created_at", "id"))
    bodies = [json.loads(row.body) for row in rows]
    expected = ["outbound.sent", "outbound.sent", "outbound.failed"]
    expected += ["outbound.pending", "outbound.rejected"]
    assert sorted(body["type"] for body in bodies) == sorted(expected)
    assert {body["data"]["inbox"]["id"] for body in bodies} == {a["id"]}
    assert {body["data"]["outbound"]["inbox_id"] for body in bodies} == {a["id"]}
    for delivery_id in webhook_services.DELIVERIES.due():  # what the beat sweeper does
        webhook_services.attempt(delivery_id)
    arrived = receiver.wait_for(len(rows))
    assert sorted(json.loads(r.body)["id"] for r in arrived) == sorted(row.pk for row in rows)

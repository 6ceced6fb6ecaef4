"""The hand-written ``to_representation`` of the hot response serializers (config.api.represent)
equals DRF's own field machinery over the same objects, key order included, and the orjson
renderer writes the bytes DRF's renderer writes.

Each fast path is compared with ``serializers.Serializer.to_representation`` — the generic walk
over the declared fields that the override replaces — on objects that exercise every field:
permanent, expiring and expired inboxes, tags, sender lists, forwarding, fault rules with and
without their optional fields; emails with labels, attachments, cc, reply-to and extracted codes.
A field added to a serializer and not to its fast path fails here.
"""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone
from rest_framework import serializers
from rest_framework.renderers import JSONRenderer

from apikeys.models import Workspace
from config.api.pagination import cursor_id, rows_page
from config.api.renderers import JsonRenderer
from inboxes.models import Inbox
from inboxes.selectors import inbox_page_rows
from inboxes.serializers import InboxOut, inbox_rows_out
from labels.models import EmailLabel, Label
from mail.models import Email
from mail.pipeline import receive_one
from mail.serializers import EmailOut, EmailSummaryOut, email_record_out
from tests.mail.messages import PNG, message


def generic(serializer: serializers.Serializer, instance: object) -> dict:
    return serializers.Serializer.to_representation(serializer, instance)


def same(serializer_class: type[serializers.Serializer], instance: object) -> None:
    fast = serializer_class(instance).data
    slow = generic(serializer_class(), instance)
    assert list(fast.items()) == list(slow.items())
    assert JsonRenderer().render(fast) == JSONRenderer().render(slow)


def test_inbox_out_is_drfs_output(workspace: Workspace) -> None:
    now = timezone.now()
    rows = [
        Inbox.objects.create(
            workspace=workspace, address="plain@x.test", local_part="plain", domain="x.test"
        ),
        Inbox.objects.create(
            workspace=workspace,
            address="full@x.test",
            local_part="full",
            domain="x.test",
            name="Signup — tests\u2028",
            agent_name="ci-bot",
            tags=["a", "b", 'ünï \u2028 "q"'],
            ttl_minutes=60,
            expires_at=now + timedelta(minutes=60),
            max_emails=10,
            overflow="reject",
            allow_senders=["*@example.com"],
            block_senders=["spam@example.com"],
            forward_to="owner@example.org",
            smtp_faults=[
                {"stage": "rcpt", "reply": "450 4.2.0 later", "mode": "always", "delay_ms": 0},
                {
                    "stage": "data",
                    "reply": "451 4.3.0 again",
                    "mode": "probability",
                    "probability": 0.25,
                    "delay_ms": 100,
                },
                {
                    "stage": "rcpt",
                    "reply": "450 greylisted",
                    "mode": "greylist",
                    "window_seconds": 30,
                    "count": 2,
                    "delay_ms": 5,
                },
            ],
            injected_faults=3,
            email_count=4,
            unread_count=2,
            last_email_at=now.replace(microsecond=0),
        ),
        Inbox.objects.create(
            workspace=workspace,
            address="old@x.test",
            local_part="old",
            domain="x.test",
            ttl_minutes=1,
            expires_at=now - timedelta(minutes=5),
        ),
    ]
    for row in Inbox.objects.filter(workspace=workspace):
        same(InboxOut, row)
    assert len(rows) == 3
    page = InboxOut(list(Inbox.objects.filter(workspace=workspace)), many=True).data
    assert [generic(InboxOut(), r) for r in Inbox.objects.filter(workspace=workspace)] == page
    # GET /inboxes reads its page as tuples: unfiltered by one statement of its own
    # (PostgreSQL), filtered through the queryset; both equal, pages and cursors, to DRF's
    # InboxOut over the same inboxes.
    ordered = list(Inbox.objects.filter(workspace=workspace).order_by("-pk"))
    for filters, wanted in [
        ({}, ordered),
        ({"include_expired": True}, ordered),
        ({"q": "x.test", "include_expired": True}, ordered),
        ({"agent": "ci-bot"}, [r for r in ordered if r.agent_name == "ci-bot"]),
        ({"tag": "a"}, [r for r in ordered if "a" in r.tags]),
    ]:
        if not filters.get("include_expired"):
            wanted = [r for r in wanted if not r.is_expired()]
        listed: list[dict] = []
        after = None
        while True:  # pages of two: each path's cursor too
            page = rows_page(
                inbox_page_rows(workspace, **filters, after=after, limit=3), 2, inbox_rows_out
            ).data
            listed += page["data"]
            if page["next_cursor"] is None:
                break
            after = cursor_id({"cursor": page["next_cursor"]})
        slow = [generic(InboxOut(), r) for r in wanted]
        assert [list(r.items()) for r in listed] == [list(r.items()) for r in slow], filters
        assert JsonRenderer().render(listed) == JSONRenderer().render(slow)
    assert len(ordered) == 3


def test_email_out_is_drfs_output(workspace: Workspace) -> None:
    from inboxes.services import inbox_create
    from mail.selectors import email_get, email_list, email_record

    inbox = inbox_create(workspace=workspace, local_part="repr", ttl_minutes=None)
    raw = message(
        to=inbox.address,
        sender="noreply@service.example",
        sender_name="Service",
        subject="Your code is 123456",
        text="Your code is 123456. Verify: https://service.example/verify?t=abc",
        html="<p>Your code is <b>123456</b></p>",
        attachments=[("a.png", "image/png", PNG), ("notes \u2028.txt", "text/plain", b"hi")],
        headers={"Cc": "Copy <copy@example.org>", "Reply-To": "reply@example.org"},
    )
    delivery = receive_one(raw, to=inbox.address)
    bare = receive_one(message(to=inbox.address, sender="", text="x"), to=inbox.address)
    label = Label.objects.create(workspace=workspace, key="otp", name="OTP")
    EmailLabel.objects.create(
        email_id=delivery.email_id, label=label, key="otp", source="manual", confidence=0.875
    )
    other = Label.objects.create(workspace=workspace, key="odd", name="Odd")
    EmailLabel.objects.create(
        email_id=delivery.email_id,
        label=other,
        key="odd",
        source="classifier",
        confidence=0.1 + 0.2,
    )
    # An authentication verdict as the smtpd's checks store it (mail.authentication.check).
    Email.objects.filter(pk=delivery.email_id).update(
        authentication={
            "spf": {
                "result": "pass",
                "domain": "service.example",
                "identity": "mailfrom",
                "client_ip": "192.0.2.1",
                "reason": "sender SPF authorized",
            },
            "dkim": [
                {"result": "pass", "domain": "service.example", "selector": "s1", "reason": ""},
                {"result": "fail", "domain": "esp.example", "selector": "k", "reason": "x"},
            ],
            "dmarc": {
                "result": "pass",
                "domain": "service.example",
                "policy": "reject",
                "alignment": ["dkim", "spf"],
                "reason": "",
            },
            "arc": {"result": "none", "domain": "", "instances": 0, "reason": ""},
        }
    )
    for email_id in (delivery.email_id, bare.email_id):
        same(EmailOut, email_get(workspace, email_id))
        # getEmail reads the email, its labels and attachments in one statement (PostgreSQL).
        record = email_record_out(email_record(workspace, email_id))
        slow = generic(EmailOut(), email_get(workspace, email_id))
        assert list(record.items()) == list(slow.items())
        assert JsonRenderer().render(record) == JSONRenderer().render(slow)
    for email in email_list(workspace):
        same(EmailSummaryOut, email)
    assert Email.objects.filter(workspace=workspace).count() == 2

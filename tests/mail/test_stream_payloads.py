"""The SSE data layouts, from event data to the stream's camelCase shape."""

from __future__ import annotations

from mail.realtime import stream_payload


def test_layouts() -> None:
    email = {
        "id": "eml_1",
        "from": {"address": "a@b.example", "name": "A"},
        "subject": "S",
        "verification": {"code": "123456", "link": None},
        "read": True,
        "starred": False,
        "labels": [{"key": "k", "source": "manual", "confidence": 1.0}],
    }
    assert stream_payload("email.received", "inb_1", {"email": email}, 5) == {
        "type": "email.received",
        "inboxId": "inb_1",
        "emailId": "eml_1",
        "from": "a@b.example",
        "subject": "S",
        "code": "123456",
        "at": 5,
    }
    assert stream_payload("email.updated", "inb_1", {"email": email}, 6) == {
        "type": "email.updated",
        "inboxId": "inb_1",
        "emailId": "eml_1",
        "read": True,
        "starred": False,
        "labels": email["labels"],
        "at": 6,
    }
    assert stream_payload("email.deleted", "inb_1", {"email": {"id": "eml_1"}}, 7) == {
        "type": "email.deleted",
        "inboxId": "inb_1",
        "emailId": "eml_1",
        "at": 7,
    }
    assert stream_payload(
        "email.labeled", "inb_1", {"email": {"id": "eml_1"}, "labels": []}, 8
    ) == {
        "type": "email.labeled",
        "inboxId": "inb_1",
        "emailId": "eml_1",
        "labels": [],
        "at": 8,
    }
    assert stream_payload("mail.rejected", "inb_1", {"from": "x@y.example", "reason": "no"}, 9) == {
        "type": "mail.rejected",
        "inboxId": "inb_1",
        "from": "x@y.example",
        "reason": "no",
        "at": 9,
    }

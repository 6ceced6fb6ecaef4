"""The emails API over mail delivered through the pipeline (the function SMTP calls)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from apikeys.models import Workspace
from events.models import Event
from inboxes import services as inbox_services
from inboxes.models import Inbox
from labels.models import Label
from mail import pipeline
from mail.models import Attachment, Email, RawMessage
from tests.conftest import Api, error_of
from tests.mail.messages import PDF, message

pytestmark = pytest.mark.django_db

FULL_FIELDS = {
    "id",
    "inbox_id",
    "message_id",
    "from",
    "to",
    "cc",
    "reply_to",
    "subject",
    "text",
    "html",
    "headers",
    "attachments",
    "labels",
    "read",
    "starred",
    "extracted",
    "preview",
    "size",
    "in_reply_to",
    "references",
    "received_at",
    "defects",
    "authentication",
    "envelope_recipients",
}
LIST_FIELDS = {
    "id",
    "inbox_id",
    "from",
    "to",
    "subject",
    "preview",
    "labels",
    "read",
    "starred",
    "has_attachments",
    "received_at",
}


@pytest.fixture
def inbox(workspace: Workspace) -> Inbox:
    return inbox_services.inbox_create(workspace=workspace, local_part="box")


def deliver(inbox: Inbox, **kwargs: object) -> str:
    delivery = pipeline.receive_one(message(to=inbox.address, **kwargs), to=inbox.address)  # type: ignore[arg-type]
    assert delivery.email_id, delivery
    return delivery.email_id


def test_full_record(api: Api, inbox: Inbox) -> None:
    email_id = deliver(
        inbox,
        sender_name="Shop",
        subject="Your order",
        text="Thanks!",
        html="<p>Thanks!</p>",
        attachments=[("a.pdf", "application/pdf", PDF)],
        headers={"Reply-To": "Help <help@shop.example>", "Cc": "boss@corp.example"},
    )
    body = api.call("GET", f"emails/{email_id}").json()
    assert set(body) == FULL_FIELDS
    assert body["from"] == {"address": "noreply@service.example", "name": "Shop"}
    assert body["reply_to"] == [{"address": "help@shop.example", "name": "Help"}]
    assert body["cc"] == [{"address": "boss@corp.example", "name": ""}]
    assert body["inbox_id"] == inbox.pk and body["read"] is False
    assert body["envelope_recipients"] == [inbox.address]
    assert {"name": "Subject", "value": "Your order"} in body["headers"]
    assert [h["name"] for h in body["headers"]][:3] == ["From", "To", "Subject"]
    assert body["attachments"][0]["filename"] == "a.pdf"
    assert body["attachments"][0]["id"].startswith("att_")
    assert body["extracted"] == {"code": None, "link": None, "codes": [], "links": []}
    assert body["message_id"].endswith("@service.example")
    assert body["authentication"] is None  # delivered without SMTP: not checked


def test_list_entries_and_filters(api: Api, inbox: Inbox) -> None:
    first = deliver(inbox, subject="Welcome aboard", sender="hello@alpha.example")
    second = deliver(inbox, subject="Reset your password", text="Click to reset")
    third = deliver(inbox, subject="Weekly news", sender_name="Zeta Digest")
    page = api.call("GET", f"inboxes/{inbox.pk}/emails").json()
    assert [e["id"] for e in page["data"]] == [third, second, first]
    assert set(page["data"][0]) == LIST_FIELDS

    def ids(**query: object) -> list[str]:
        return [e["id"] for e in api.call("GET", "emails", query).json()["data"]]

    assert ids(q="ALPHA.example") == [first]
    assert ids(q="zeta") == [third]
    assert ids(q="click to") == [second]
    api.call("PATCH", f"emails/{second}", {"read": True})
    assert ids(unread="true") == [third, first]
    assert ids(unread="false") == [second]
    assert ids(inbox=inbox.address) == [third, second, first]
    Email.objects.filter(pk=first).update(received_at=timezone.now() - timedelta(hours=2))
    since = (timezone.now() - timedelta(hours=1)).isoformat()
    assert ids(since=since) == [third, second]


def test_label_filter_and_manual_labels(api: Api, inbox: Inbox, workspace: Workspace) -> None:
    Label.objects.create(workspace=workspace, key="billing", name="Billing")
    Label.objects.create(workspace=workspace, key="vip", name="VIP")
    tagged, plain = deliver(inbox, subject="Invoice"), deliver(inbox, subject="Hi")
    body = api.call("PATCH", f"emails/{tagged}", {"labels": ["billing", "vip"]}).json()
    assert [(lbl["key"], lbl["source"], lbl["confidence"]) for lbl in body["labels"]] == [
        ("billing", "manual", 1.0),
        ("vip", "manual", 1.0),
    ]
    assert [e["id"] for e in api.call("GET", "emails", {"label": "vip"}).json()["data"]] == [tagged]
    body = api.call("PATCH", f"emails/{tagged}", {"labels": ["vip"]}).json()
    assert [lbl["key"] for lbl in body["labels"]] == ["vip"]
    response = api.call("PATCH", f"emails/{plain}", {"labels": ["vip", "nope"]})
    assert error_of(response) == (400, "unknown_label")
    assert api.call("GET", f"emails/{plain}").json()["labels"] == []


def test_flags_counters_and_events(api: Api, inbox: Inbox) -> None:
    email_id = deliver(inbox)
    body = api.call("PATCH", f"emails/{email_id}", {"read": True, "starred": True}).json()
    assert body["read"] is True and body["starred"] is True
    inbox.refresh_from_db()
    assert inbox.unread_count == 0 and inbox.email_count == 1
    api.call("PATCH", f"emails/{email_id}", {"read": True})  # no change, no double count
    inbox.refresh_from_db()
    assert inbox.unread_count == 0
    updated = Event.objects.filter(type="email.updated", inbox_id=inbox.pk)
    assert updated.count() == 1
    assert updated.get().data["email"] == {
        "id": email_id,
        "read": True,
        "starred": True,
        "labels": [],
    }
    response = api.call("PATCH", f"emails/{email_id}", {"read": "perhaps"})
    assert error_of(response) == (400, "validation_error")


def test_mark_read_on_get(api: Api, inbox: Inbox) -> None:
    email_id = deliver(inbox)
    assert api.call("GET", f"emails/{email_id}").json()["read"] is False
    assert api.call("GET", f"emails/{email_id}", {"mark_read": "true"}).json()["read"] is True
    inbox.refresh_from_db()
    assert inbox.unread_count == 0


def test_delete_email(api: Api, inbox: Inbox) -> None:
    email_id = deliver(inbox, attachments=[("a.pdf", "application/pdf", PDF)])
    assert api.call("DELETE", f"emails/{email_id}").json() == {"deleted": True, "id": email_id}
    assert error_of(api.call("GET", f"emails/{email_id}")) == (404, "not_found")
    assert not RawMessage.objects.filter(email_id=email_id).exists()
    assert not Attachment.objects.filter(email_id=email_id).exists()
    inbox.refresh_from_db()
    assert inbox.email_count == 0 and inbox.unread_count == 0
    assert Event.objects.filter(type="email.deleted", inbox_id=inbox.pk).count() == 1


def test_deleting_the_inbox_leaves_nothing(api: Api, inbox: Inbox) -> None:
    for _ in range(3):
        deliver(inbox, attachments=[("a.pdf", "application/pdf", PDF)])
    assert api.call("DELETE", f"inboxes/{inbox.pk}").status_code == 200
    assert Email.objects.count() == RawMessage.objects.count() == Attachment.objects.count() == 0
    # Its log goes too; only inbox.deleted, emitted after, names it.
    assert [e.type for e in Event.objects.filter(inbox_id=inbox.pk)] == ["inbox.deleted"]


def test_list_limits(api: Api, inbox: Inbox) -> None:
    for _ in range(3):
        deliver(inbox)
    assert len(api.call("GET", "emails", {"limit": 2}).json()["data"]) == 2
    assert api.call("GET", "emails", {"limit": 100}).status_code == 200
    for query, path in [
        ({"limit": 101}, "limit"),
        ({"since": "yesterday"}, "since"),
        ({"unread": "maybe"}, "unread"),
        ({"cursor": "zzz"}, "cursor"),
    ]:
        response = api.call("GET", "emails", query)
        assert error_of(response) == (400, "validation_error")
        assert response.json()["error"]["issues"][0]["path"] == path


def test_another_workspace_sees_nothing(api: Api, other_api: Api, inbox: Inbox) -> None:
    email_id = deliver(inbox, attachments=[("a.pdf", "application/pdf", PDF)])
    attachment_id = Attachment.objects.get(email_id=email_id).pk
    assert other_api.call("GET", "emails").json()["data"] == []
    assert other_api.call("GET", "emails", {"q": "hello"}).json()["data"] == []
    for method, path, body in [
        ("GET", f"inboxes/{inbox.pk}/emails", None),
        ("GET", f"inboxes/{inbox.address}/emails", None),
        ("GET", "emails?inbox=" + inbox.pk, None),
        ("GET", f"emails/{email_id}", None),
        ("PATCH", f"emails/{email_id}", {"read": True, "starred": True}),
        ("DELETE", f"emails/{email_id}", None),
        ("GET", f"emails/{email_id}/raw", None),
        ("GET", f"emails/{email_id}/attachments/{attachment_id}", None),
    ]:
        assert error_of(other_api.call(method, path, body)) == (404, "not_found"), path
    email = Email.objects.get(pk=email_id)
    assert email.read is False and email.starred is False
    # The right email id with a wrong attachment id, and the reverse, are 404 for the owner too.
    assert error_of(api.call("GET", f"emails/{email_id}/attachments/att_nope")) == (
        404,
        "not_found",
    )


def test_attachment_download_type_is_documented(api: Api, inbox: Inbox) -> None:
    """The download answers with the sender's declared type, and the OpenAPI allows it.

    The schema fuzzer found an image/png download against a document that promised only
    application/octet-stream (schemathesis ST105).
    """
    email_id = deliver(inbox, attachments=[("dot.png", "image/png", b"\x89PNG\r\n\x1a\n")])
    attachment_id = Attachment.objects.get(email_id=email_id).pk
    response = api.call("GET", f"emails/{email_id}/attachments/{attachment_id}")
    assert response.status_code == 200
    served = response["Content-Type"].split(";")[0]
    assert served == "image/png"
    operation = api.get("/api/openapi.json").json()["paths"][
        "/api/v1/emails/{email_id}/attachments/{attachment_id}"
    ]["get"]
    documented = operation["responses"]["200"]["content"]
    kind = served.split("/")[0]
    assert {served, f"{kind}/*", "*/*"} & set(documented), documented

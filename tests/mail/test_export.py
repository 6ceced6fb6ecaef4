"""GET /inboxes/{id}/export (issue 30, item 4): the inbox's mail as an mboxrd file, streamed a
few megabytes at a time. The file parses back with the standard library's ``mailbox`` into the
raw messages exactly as received (after undoing mboxrd's ``>From`` quoting); the same tenant
lookup and scope as every read."""

from __future__ import annotations

import mailbox
from collections.abc import Callable
from pathlib import Path

import pytest

from apikeys.models import Workspace
from inboxes import services as inbox_services
from inboxes.models import Inbox
from mail import pipeline, selectors
from mail.message import mbox
from mail.models import RawMessage
from tests.conftest import Api, error_of
from tests.factories import MembershipFactory
from tests.mail.messages import PDF, message

pytestmark = pytest.mark.django_db

TRICKY = [
    # Lines an mbox reader would take for the next message, unless quoted.
    message(text="Hello.\nFrom the team: thanks.\n>From quoted already\n>>From twice\n"),
    message(attachments=[("a.pdf", "application/pdf", PDF)]),
    message(subject="From here on", text="From\nFrom \nFromage\n"),
    b"From: someone@example.org\nSubject: LF only\n\nFrom the start\n",  # bare LF endings
]


@pytest.fixture
def inbox(workspace: Workspace) -> Inbox:
    return inbox_services.inbox_create(workspace=workspace, local_part="export")


def read_back(body: bytes, tmp_path: Path) -> list[bytes]:
    path = tmp_path / "inbox.mbox"
    path.write_bytes(body)
    box = mailbox.mbox(str(path), create=False)
    try:
        return [mbox.unquote(box.get_bytes(key)) for key in box.iterkeys()]
    finally:
        box.close()


def test_the_export_parses_back_into_the_messages_as_received(
    api: Api, inbox: Inbox, tmp_path: Path, settings
) -> None:  # type: ignore[no-untyped-def]
    ids = [
        pipeline.receive(raw, mail_from="sender@example.org", rcpt_tos=[inbox.address])[0].email_id
        for raw in TRICKY * 3
    ]
    response = api.call("GET", f"inboxes/{inbox.address}/export")
    assert response.status_code == 200
    assert response.streaming
    assert response["Content-Type"] == "application/mbox"
    assert f'filename="{inbox.address}.mbox"' in response["Content-Disposition"]
    body = b"".join(response)
    stored = {r.email_id: bytes(r.content) for r in RawMessage.objects.filter(email_id__in=ids)}
    assert read_back(body, tmp_path) == [stored[pk] for pk in ids]  # oldest first
    assert body.count(b"\n>From the team") == 3  # quoted on the wire (mboxrd)
    assert body.startswith(b"From sender@example.org ")  # the envelope sender and the date


def test_an_export_is_read_in_batches_of_bounded_size(
    inbox: Inbox, workspace: Workspace, tmp_path: Path, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    """Each batch of raw messages stays under EXPORT_BATCH_BYTES (a larger one goes alone)."""
    raws = [message(to=inbox.address, text="z" * 3000) for _ in range(7)]
    for raw in raws:
        pipeline.receive_one(raw, to=inbox.address)
    monkeypatch.setattr(selectors, "EXPORT_BATCH_BYTES", 2 * max(map(len, raws)) + 1)
    parts = list(selectors.inbox_mbox(workspace, inbox))
    assert len(parts) == 4  # 2 + 2 + 2 + 1 messages
    assert [part.count(b"From MAILER-DAEMON ") for part in parts] == [2, 2, 2, 1]
    from asgiref.sync import async_to_sync

    async def collect() -> list[bytes]:  # as daphne reads it
        return [part async for part in selectors.inbox_mbox_async(workspace, inbox)]

    assert async_to_sync(collect)() == parts
    assert read_back(b"".join(parts), tmp_path) == [
        bytes(r.content) for r in RawMessage.objects.filter(email__inbox=inbox).order_by("pk")
    ]


def test_an_empty_inbox_exports_an_empty_file(api: Api, inbox: Inbox) -> None:
    response = api.call("GET", f"inboxes/{inbox.pk}/export")
    assert response.status_code == 200 and b"".join(response) == b""


def test_another_workspaces_inbox_is_not_found(other_api: Api, inbox: Inbox) -> None:
    pipeline.receive_one(message(to=inbox.address), to=inbox.address)
    assert error_of(other_api.call("GET", f"inboxes/{inbox.pk}/export")) == (404, "not_found")
    assert error_of(other_api.call("GET", f"inboxes/{inbox.address}/export")) == (
        404,
        "not_found",
    )


def test_a_key_without_read_scope_is_refused(
    inbox: Inbox, workspace: Workspace, make_key: Callable[..., str]
) -> None:
    sender = Api(make_key(workspace, scopes=("send",)))
    response = sender.call("GET", f"inboxes/{inbox.pk}/export")
    assert error_of(response) == (403, "insufficient_scope")
    assert error_of(Api().call("GET", f"inboxes/{inbox.pk}/export"))[0] == 401


def test_the_inbox_page_links_the_export(client, inbox: Inbox, workspace: Workspace) -> None:  # type: ignore[no-untyped-def]
    client.force_login(MembershipFactory(workspace=workspace).user)
    page = client.get(f"/inboxes/{inbox.pk}/").content.decode()
    assert f'href="/api/v1/inboxes/{inbox.pk}/export"' in page
    response = client.get(f"/api/v1/inboxes/{inbox.pk}/export")  # the session reads it too
    assert response.status_code == 200 and response.streaming


def test_daphne_streams_the_export(
    transactional_db: None, workspace: Workspace, make_key: Callable[..., str], tmp_path: Path
) -> None:
    """The live web process (daphne, or ``manage.py serve`` in embedded mode) sends the file as
    it reads it: the async iterator path, which the test client above never takes."""
    from django.db import connection

    from tests.live import Stack

    inbox = inbox_services.inbox_create(workspace=workspace, local_part="streamed")
    raws = [message(to=inbox.address, text=f"From line {i}\n" + "w" * 5000) for i in range(40)]
    for raw in raws:
        pipeline.receive(raw, mail_from="s@example.org", rcpt_tos=[inbox.address])
    stack = Stack(connection.settings_dict["NAME"])
    for process in {id(p): p for p in (stack.web, stack.smtp)}.values():
        process.env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)  # keep Django's async-safety checks
    try:
        stack.start()
    except RuntimeError as error:
        raise AssertionError("\n".join(stack.web.logs)) from error
    try:
        key = make_key(workspace, scopes=("read",))
        with (
            stack.client(key) as client,
            client.stream("GET", f"inboxes/{inbox.pk}/export") as response,
        ):
            assert response.status_code == 200
            assert response.headers["content-type"] == "application/mbox"
            assert "content-length" not in response.headers  # streamed, not buffered
            body = b"".join(response.iter_bytes())
    finally:
        stack.stop()
    assert read_back(body, tmp_path) == raws

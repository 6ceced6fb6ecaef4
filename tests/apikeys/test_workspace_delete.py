"""Leaving (issue 30, item 6): an owner deletes the workspace with everything in it from the
dashboard (``/settings/delete/``, its name typed again); its API keys stop working at once, before
the mail is removed; admins and members get 403."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from apikeys import selectors
from apikeys import services as key_services
from apikeys.audit import Actor
from apikeys.exceptions import InvalidKey
from apikeys.models import ApiKey, Membership, Role, Workspace
from config.api.errors import Forbidden, Unauthorized, ValidationFailed
from events.models import Event
from inboxes import services as inbox_services
from inboxes.models import Inbox
from labels.models import Label
from mail import pipeline
from mail.models import Attachment, Email, RawMessage
from tests.conftest import Api, error_of
from tests.factories import MembershipFactory
from tests.mail.messages import PDF, message
from webhooks import services as webhook_services
from webhooks.models import Delivery, Endpoint

pytestmark = pytest.mark.django_db


@pytest.fixture
def filled(workspace: Workspace, make_key: Callable[..., str]) -> dict[str, object]:
    """A workspace with inboxes, mail, a label, a webhook endpoint and a key."""
    plain = make_key(workspace)
    for name in ("one", "two"):
        inbox = inbox_services.inbox_create(workspace=workspace, local_part=name)
        for _ in range(3):
            raw = message(to=inbox.address, attachments=[("a.pdf", "x/y", PDF)])
            pipeline.receive_one(raw, to=inbox.address)
    Label.objects.create(workspace=workspace, key="otp", name="OTP")
    webhook_services.endpoint_create(
        workspace=workspace,
        url="https://hooks.example/in",
        events=["inbox.created"],
        inbox_ids=[],
        label_keys=[],
        by=Actor.system("tests"),
    )
    inbox_services.inbox_create(workspace=workspace, local_part="hooked")  # one delivery
    return {"key": plain}


def test_an_owner_deletes_the_workspace_with_everything_in_it(
    client, workspace: Workspace, other_workspace: Workspace, filled: dict, settings
) -> None:  # type: ignore[no-untyped-def]
    settings.RETENTION_CHUNK = 2  # the mail goes a chunk at a time
    owner = MembershipFactory(workspace=workspace, role=Role.OWNER)
    theirs = inbox_services.inbox_create(workspace=other_workspace, local_part="theirs")
    pipeline.receive_one(message(to=theirs.address), to=theirs.address)
    api = Api(filled["key"])
    assert api.call("GET", "inboxes").status_code == 200
    assert Delivery.objects.filter(workspace_id=workspace.pk).count() == 1
    client.force_login(owner.user)

    page = client.get("/settings/")
    assert b'href="/settings/delete/"' in page.content
    assert client.get("/settings/delete/").status_code == 200
    wrong = client.post("/settings/delete/", {"confirm": "Not the name"})
    assert wrong.status_code == 200 and b"errorlist" in wrong.content
    assert Workspace.objects.filter(pk=workspace.pk).exists()
    assert api.call("GET", "inboxes").status_code == 200  # a wrong name changes nothing

    done = client.post("/settings/delete/", {"confirm": workspace.name})
    assert done.status_code == 302
    assert not Workspace.objects.filter(pk=workspace.pk).exists()
    for model in (Inbox, Email, Label, Endpoint, Delivery, ApiKey, Membership):
        assert not model.objects.filter(workspace_id=workspace.pk).exists(), model
    assert not RawMessage.objects.filter(email__workspace_id=workspace.pk).exists()
    assert not Attachment.objects.filter(email__workspace_id=workspace.pk).exists()
    assert not Event.objects.filter(workspace_id=workspace.pk).exists()
    assert error_of(api.call("GET", "inboxes")) == (401, "unauthorized")
    # The other workspace keeps everything.
    assert Email.objects.filter(inbox=theirs).count() == 1
    assert Inbox.objects.get(pk=theirs.pk).stored_bytes > 0


def test_the_keys_stop_working_before_the_mail_is_removed(
    workspace: Workspace, filled: dict
) -> None:
    """Revocation commits first: a request made while the mail is still being deleted (here,
    from a hook that runs then) is refused, and so is every open wait or stream's key."""
    owner = MembershipFactory(workspace=workspace, role=Role.OWNER)
    key = ApiKey.objects.get(workspace=workspace)
    seen: list[tuple[str, object]] = []

    def during(workspace_id: str) -> None:
        with pytest.raises(Unauthorized) as refused:
            selectors.api_key_for_plain(filled["key"])
        seen.append(("request", refused.value.code))
        watched = selectors.api_keys_invalid([(workspace_id, key.pk)])
        seen.append(("watch", type(watched[key.pk]).__name__))
        seen.append(("mail left", Email.objects.filter(workspace_id=workspace_id).exists()))

    key_services.on_workspace_delete(during)
    try:
        key_services.workspace_delete(actor=owner, confirm=workspace.name)
    finally:
        key_services._before_workspace_delete.remove(during)
    assert seen == [("request", "unauthorized"), ("watch", "KeyRevoked"), ("mail left", False)]
    # Once deleted, the watch's query finds the key gone: InvalidKey for every open request.
    assert isinstance(selectors.api_keys_invalid([(workspace.pk, key.pk)])[key.pk], InvalidKey)


@pytest.mark.parametrize("role", [Role.ADMIN, Role.MEMBER])
def test_admins_and_members_may_not(client, workspace: Workspace, role: str) -> None:  # type: ignore[no-untyped-def]
    person = MembershipFactory(workspace=workspace, role=role)
    client.force_login(person.user)
    assert client.get("/settings/delete/").status_code == 403
    assert client.post("/settings/delete/", {"confirm": workspace.name}).status_code == 403
    assert b'href="/settings/delete/"' not in client.get("/settings/").content
    with pytest.raises(Forbidden):
        key_services.workspace_delete(actor=person, confirm=workspace.name)
    assert Workspace.objects.filter(pk=workspace.pk).exists()


def test_the_name_must_be_typed_exactly(workspace: Workspace) -> None:
    owner = MembershipFactory(workspace=workspace, role=Role.OWNER)
    with pytest.raises(ValidationFailed) as caught:
        key_services.workspace_delete(actor=owner, confirm=workspace.name.upper() + "x")
    assert caught.value.issues[0]["path"] == "confirm"
    assert Workspace.objects.filter(pk=workspace.pk).exists()

"""The Django admin: every model of every app is registered, every list, search and object page
loads for a superuser, and secrets (plain keys, digests, webhook secrets, raw bytes) never show."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest
from django.apps import apps
from django.contrib import admin
from django.contrib.admin.utils import quote
from django.db import models
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from apikeys import services as key_services
from apikeys.audit import Actor
from apikeys.models import ApiKey, AuditEntry, Invitation, Membership, Workspace
from events.models import Event
from inboxes import services as inbox_services
from inboxes.models import Domain, Inbox, SmtpCredential
from labels.models import EmailLabel, Label, LabelFeedback
from mail import pipeline
from mail.models import Attachment, Email, RawMessage
from outbox.models import OutboxItem
from tests.factories import UserFactory
from tests.mail.messages import PDF, message
from webhooks import services as webhook_services
from webhooks.models import Attempt, Delivery, Endpoint

pytestmark = pytest.mark.django_db

OUR_APPS = ("events", "apikeys", "inboxes", "mail", "labels", "outbox", "webhooks")
RAW_MARKER = "X-Only-In-The-Raw-Bytes"
OUTBOX_RAW_MARKER = b"outbox-raw-bytes-never-shown"


@dataclass
class World:
    """One object of every model, with a search term that finds it."""

    objects: dict[type[models.Model], tuple[models.Model, str]] = field(default_factory=dict)
    plain_key: str = ""
    secret: str = ""
    smtp_password: str = ""
    invitation_link: str = ""


@pytest.fixture
def world(db: None) -> World:
    found = World()
    workspace = key_services.workspace_get_or_create(name="Admin Test Co")
    person = key_services.user_get_or_create(email="admin-person@example.com", password="pw-1-long")
    membership = key_services.membership_set(
        workspace=workspace, user=person, role="owner", by=Actor.system("tests")
    )
    created = key_services.api_key_create(
        workspace=workspace, name="admin-test-key", by=Actor.system("tests")
    )
    found.plain_key = created.plain
    invited = key_services.invitation_create(
        actor=membership, email="admin-invitee@example.com", role="member", by=Actor.system("tests")
    )
    found.invitation_link = invited.plain
    domain = inbox_services.domain_add(
        workspace=workspace, domain="admin-test.example", by=Actor.system("tests")
    )
    inbox = inbox_services.inbox_create(workspace=workspace, local_part="admintest")
    endpoint, found.secret = webhook_services.endpoint_create(
        workspace=workspace,
        url="https://hooks.example.com/admin-test",
        events=["email.received"],
        inbox_ids=[],
        label_keys=[],
        by=Actor.system("tests"),
    )
    label = Label.objects.create(
        workspace=workspace,
        key="admin-invoices",
        name="Invoices",
        rules={
            "match": "any",
            "conditions": [
                {
                    "field": "subject",
                    "op": "contains",
                    "value": "Admin invoice",
                    "name": "",
                    "negate": False,
                }
            ],
        },
    )
    raw = message(
        to=inbox.address,
        subject="Admin invoice 4411",
        attachments=[("admin-report.pdf", "application/pdf", PDF)],
        headers={RAW_MARKER: "raw-header-value"},
    )
    email = Email.objects.get(pk=pipeline.receive_one(raw, to=inbox.address).email_id)
    feedback = LabelFeedback.objects.create(
        label=label, email_id=email.pk, positive=True, subject="Admin feedback example"
    )
    item = OutboxItem.objects.create(
        workspace=workspace,
        inbox=inbox,
        from_address=inbox.address,
        to=["someone@example.com"],
        subject="Admin outgoing hello",
        text="Hi",
        status="pending",
        approval_required=True,
        raw=b"Subject: x\r\n\r\n" + OUTBOX_RAW_MARKER,
    )
    delivery = Delivery.objects.get(endpoint=endpoint)
    attempt = Attempt.objects.create(
        delivery=delivery, at=delivery.created_at, status_code=500, error="admin-test-error"
    )
    event = Event.objects.filter(inbox_id=inbox.pk, type="email.received").get()
    smtp_login = inbox_services.smtp_credential_create(
        inbox=inbox, name="admin smtp note", by=Actor.system("tests")
    )
    found.smtp_password = smtp_login.password
    found.objects = {
        Workspace: (workspace, "Admin Test"),
        Membership: (membership, "admin-person@"),
        ApiKey: (created.key, "admin-test-key"),
        Invitation: (invited.invitation, "admin-invitee@"),
        Domain: (domain, "admin-test.example"),
        Inbox: (inbox, "admintest@"),
        Email: (email, "Admin invoice"),
        RawMessage: (RawMessage.objects.get(email=email), email.pk),
        Attachment: (Attachment.objects.get(email=email), "admin-report"),
        Label: (label, "admin-invoices"),
        EmailLabel: (EmailLabel.objects.get(email=email, label=label), "admin-invoices"),
        LabelFeedback: (feedback, "Admin feedback"),
        OutboxItem: (item, "Admin outgoing"),
        Event: (event, "email.received"),
        Endpoint: (endpoint, "hooks.example.com/admin-test"),
        Delivery: (delivery, delivery.pk),
        Attempt: (attempt, "admin-test-error"),
        SmtpCredential: (smtp_login.credential, "admintest-"),
        AuditEntry: (
            AuditEntry.objects.get(workspace=workspace, action="key.created"),
            "admin-test-key",
        ),
    }
    return found


@pytest.fixture
def staff(client: Client) -> Client:
    client.force_login(UserFactory(is_staff=True, is_superuser=True))
    return client


def _our_models() -> list[type[models.Model]]:
    return [
        model
        for config in apps.get_app_configs()
        if config.label in OUR_APPS
        for model in config.get_models()
    ]


def _url(model: type[models.Model], view: str, *args: Any) -> str:
    # The admin quotes primary keys in its URLs ("_" becomes "_5F").
    return reverse(
        f"admin:{model._meta.app_label}_{model._meta.model_name}_{view}",
        args=[quote(arg) for arg in args],
    )


def test_every_model_of_every_app_is_registered() -> None:
    ours = _our_models()
    assert len(ours) >= 16
    missing = [model.__name__ for model in ours if model not in admin.site._registry]
    assert missing == []
    for model in ours:
        model_admin = admin.site._registry[model]
        assert model_admin.search_fields, f"{model.__name__} has no search"
        assert model_admin.ordering, f"{model.__name__} has no ordering"
        assert model_admin.date_hierarchy, f"{model.__name__} has no date hierarchy"


def test_the_fixture_covers_every_model(world: World) -> None:
    assert set(world.objects) == set(_our_models())


def test_lists_search_and_object_pages_load(staff: Client, world: World) -> None:
    for model, (obj, term) in world.objects.items():
        name = model.__name__
        change = _url(model, "change", obj.pk)
        listing = staff.get(_url(model, "changelist"))
        assert listing.status_code == 200, name
        assert change in listing.content.decode(), name
        found = staff.get(_url(model, "changelist"), {"q": term})
        assert found.status_code == 200, name
        assert change in found.content.decode(), f"{name}: ?q={term} did not find it"
        nothing = staff.get(_url(model, "changelist"), {"q": "zz-no-such-thing-zz"})
        assert nothing.status_code == 200, name
        assert change not in nothing.content.decode(), name
        page = staff.get(change)
        assert page.status_code == 200, name
        assert str(obj.pk) in page.content.decode(), name


def test_filters_and_date_drilldown(staff: Client, world: World) -> None:
    email = world.objects[Email][0]
    year = email.received_at.year  # type: ignore[attr-defined]
    assert staff.get(_url(Email, "changelist"), {"received_at__year": year}).status_code == 200
    inbox = world.objects[Inbox][0]
    active = staff.get(_url(Inbox, "changelist"), {"status": "active"}).content.decode()
    assert _url(Inbox, "change", inbox.pk) in active
    expired = staff.get(_url(Inbox, "changelist"), {"status": "expired"}).content.decode()
    assert _url(Inbox, "change", inbox.pk) not in expired
    assert (
        staff.get(_url(OutboxItem, "changelist"), {"status__exact": "pending"}).status_code == 200
    )


def test_secrets_and_raw_bytes_never_appear(staff: Client, world: World) -> None:
    key: ApiKey = world.objects[ApiKey][0]  # type: ignore[assignment]
    endpoint: Endpoint = world.objects[Endpoint][0]  # type: ignore[assignment]
    pages = {}
    for model, (obj, _) in world.objects.items():
        pages[f"{model.__name__} list"] = staff.get(_url(model, "changelist")).content.decode()
        pages[f"{model.__name__} page"] = staff.get(_url(model, "change", obj.pk)).content.decode()
    forbidden = {
        "plain key": world.plain_key,
        "key digest": key.digest,
        "invitation link secret": world.invitation_link,
        "invitation digest": world.objects[Invitation][0].digest,  # type: ignore[attr-defined]
        "webhook secret": world.secret,
        "encrypted secret": endpoint.secret_encrypted,
        "outbox raw bytes": OUTBOX_RAW_MARKER.decode(),
        "SMTP password": world.smtp_password,
        "SMTP password digest": world.objects[SmtpCredential][0].digest,  # type: ignore[attr-defined]
    }
    for where, html in pages.items():
        for what, value in forbidden.items():
            assert value not in html, f"{what} shown on {where}"
    for where in ("RawMessage list", "RawMessage page", "Attachment page"):
        assert RAW_MARKER not in pages[where] and "%PDF" not in pages[where], where
    raw = world.objects[RawMessage][0]
    size = len(bytes(raw.content))  # type: ignore[attr-defined]
    assert f"{size} bytes" in pages["RawMessage page"]
    assert f"({size} bytes)" in pages["Email page"]  # the email shows its raw size only


def test_keys_are_revoked_through_the_service(staff: Client, world: World) -> None:
    key: ApiKey = world.objects[ApiKey][0]  # type: ignore[assignment]
    response = staff.post(
        _url(ApiKey, "changelist"),
        {"action": "revoke", admin.helpers.ACTION_CHECKBOX_NAME: [key.pk]},
        follow=True,
    )
    assert response.status_code == 200
    assert "Revoked 1 key(s)." in response.content.decode()
    key.refresh_from_db()
    assert key.revoked_at is not None


def test_no_admin_adds_what_only_services_may_create(staff: Client) -> None:
    for model in (ApiKey, Invitation, Inbox, Email, OutboxItem, Endpoint, Event, Delivery):
        assert staff.get(_url(model, "add")).status_code == 403, model.__name__


def test_forward_to_changed_in_the_admin_records_the_operator(staff: Client, world: World) -> None:
    """The admin edits forward_to through the service: the operator becomes the setter, so that
    forwarded copies follow the workspace's approval setting, never an earlier setter's."""
    inbox: Inbox = world.objects[Inbox][0]  # type: ignore[assignment]
    Inbox.objects.filter(pk=inbox.pk).update(forward_to="old@elsewhere.example")
    page = staff.get(_url(Inbox, "change", inbox.pk))
    form = page.context["adminform"].form
    data = {
        name: form[name].value() if form[name].value() is not None else "" for name in form.fields
    }
    data["forward_to"] = "new@elsewhere.example"
    response = staff.post(_url(Inbox, "change", inbox.pk), data)
    assert response.status_code == 302, response.content.decode()[:2000]
    inbox.refresh_from_db()
    operator = response.wsgi_request.user
    assert inbox.forward_to == "new@elsewhere.example"
    assert (inbox.forward_set_via, inbox.forward_set_by_user_id) == ("operator", operator.pk)
    assert inbox.forward_set_by_key_id is None and inbox.forward_requires_approval is False


def test_smtp_credentials_are_revoked_through_the_service(staff: Client, world: World) -> None:
    credential: SmtpCredential = world.objects[SmtpCredential][0]  # type: ignore[assignment]
    response = staff.post(
        _url(SmtpCredential, "changelist"),
        {"action": "revoke", admin.helpers.ACTION_CHECKBOX_NAME: [credential.pk]},
        follow=True,
    )
    assert response.status_code == 200
    credential.refresh_from_db()
    assert credential.revoked_at is not None
    assert AuditEntry.objects.filter(
        workspace_id=credential.workspace_id,
        action="smtp_credential.revoked",
        target_id=credential.pk,
        actor_type="user",
    ).exists()


def test_an_endpoint_edited_in_the_admin_keeps_its_lists_lists(staff: Client, world: World) -> None:
    """The admin edits an endpoint's ``events`` as raw JSON: a string (a subscription to one
    path of the inbox create and not the other, tests/webhooks/test_endpoint_lists.py) or an
    unknown type is refused with the field's error and nothing stored; a list is saved."""
    endpoint: Endpoint = world.objects[Endpoint][0]  # type: ignore[assignment]
    page = staff.get(_url(Endpoint, "change", endpoint.pk))
    form = page.context["adminform"].form
    data = {name: form[name].value() for name in form.fields}
    data["enabled"] = "on" if data["enabled"] else ""
    for refused, error in (
        ('"inbox.created"', "A JSON list of event types"),
        ('["inbox.created", "inbox.renamed"]', "Unknown event type(s): inbox.renamed."),
        ("[]", "This field is required."),  # the form's own check: one error, not two
        ("", "This field is required."),
    ):
        response = staff.post(_url(Endpoint, "change", endpoint.pk), {**data, "events": refused})
        assert response.status_code == 200
        errors = response.context["adminform"].form.errors["events"]
        assert len(errors) == 1 and error in errors[0], (refused, errors)
        endpoint.refresh_from_db()
        assert endpoint.events == ["email.received"]
    response = staff.post(
        _url(Endpoint, "change", endpoint.pk), {**data, "events": '["inbox.created"]'}
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    endpoint.refresh_from_db()
    assert endpoint.events == ["inbox.created"]


def test_an_inbox_edited_in_the_admin_keeps_its_sender_rules_lists(
    staff: Client, world: World
) -> None:
    """``allow_senders`` stored as the string ``"trusted.example"`` was read a character at a
    time: no sender matched a rule of one letter, so every message was refused; a block list
    so stored blocked nobody. The admin's form refuses a non-list; a list is saved."""
    inbox: Inbox = world.objects[Inbox][0]  # type: ignore[assignment]
    expires_at = timezone.now().replace(microsecond=0) + timedelta(hours=5)
    Inbox.objects.filter(pk=inbox.pk).update(expires_at=expires_at, ttl_minutes=300)
    page = staff.get(_url(Inbox, "change", inbox.pk))
    form = page.context["adminform"].form
    data = {
        name: form[name].value() if form[name].value() is not None else "" for name in form.fields
    }
    # The admin's date-time widget posts the expiry as two fields: kept as it was.
    shown = timezone.localtime(expires_at)
    data |= {"expires_at_0": f"{shown:%Y-%m-%d}", "expires_at_1": f"{shown:%H:%M:%S}"}
    for name in ("allow_senders", "block_senders", "tags"):
        response = staff.post(_url(Inbox, "change", inbox.pk), {**data, name: '"trusted.example"'})
        assert response.status_code == 200, name
        assert "A JSON list of strings" in response.context["adminform"].form.errors[name][0]
        inbox.refresh_from_db()
        assert getattr(inbox, name) == [], name
    response = staff.post(
        _url(Inbox, "change", inbox.pk), {**data, "allow_senders": '["trusted.example"]'}
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    inbox.refresh_from_db()
    assert inbox.allow_senders == ["trusted.example"]
    assert inbox.expires_at == expires_at  # nothing else changed

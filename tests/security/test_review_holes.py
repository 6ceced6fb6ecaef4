"""Holes between the day's features found in review: each test is the reproduction."""

from __future__ import annotations

import pytest
from django.contrib import admin
from django.contrib.admin.utils import quote
from django.test import Client
from django.urls import reverse

from apikeys import services
from apikeys.audit import Actor
from apikeys.models import AuditEntry, Invitation, Workspace
from inboxes import services as inbox_services
from inboxes.models import Inbox
from mail import pipeline
from tests.conftest import Api, error_of
from tests.factories import MembershipFactory, UserFactory
from tests.mail.messages import message

pytestmark = pytest.mark.django_db


@pytest.fixture
def inbox(workspace: Workspace) -> Inbox:
    return inbox_services.inbox_create(workspace=workspace, local_part="box")


@pytest.mark.parametrize(
    "q",
    [
        "before:0001-01-01T00:00:00+01:00",
        "after:9999-12-31T23:59:59-01:00",
        "before:0001-01-01T00:30:00+05:00",
    ],
)
def test_q_date_out_of_range_in_utc_is_a_400_not_a_500(api: Api, inbox: Inbox, q: str) -> None:
    pipeline.receive_one(message(to=inbox.address), to=inbox.address)
    response = api.get("/api/v1/emails", {"q": q})
    assert error_of(response) == (400, "validation_error"), response.content


# --- the operator's admin: changes a person makes there are audited too ---------------------


@pytest.fixture
def staff(client: Client) -> Client:
    client.force_login(UserFactory(is_staff=True, is_superuser=True))
    return client


def _admin_url(model: type, view: str, *args: str) -> str:
    return reverse(
        f"admin:{model._meta.app_label}_{model._meta.model_name}_{view}",
        args=[quote(arg) for arg in args],
    )


def test_invitation_withdrawn_in_the_admin_is_audited(staff: Client, workspace: Workspace) -> None:
    owner = MembershipFactory(workspace=workspace, role="owner")
    created = services.invitation_create(
        actor=owner, email="new@example.com", role="member", by=Actor.of_user(owner.user)
    )
    invitation = Invitation.objects.get(workspace=workspace, email="new@example.com")
    response = staff.post(
        _admin_url(Invitation, "changelist"),
        {"action": "withdraw", admin.helpers.ACTION_CHECKBOX_NAME: [invitation.pk]},
    )
    assert response.status_code == 302
    invitation.refresh_from_db()
    assert invitation.revoked_at is not None
    entries = AuditEntry.objects.filter(workspace=workspace, action="invitation.revoked")
    assert [(e.actor_type, e.actor_id, e.target_id) for e in entries] == [
        ("user", str(response.wsgi_request.user.pk), str(invitation.pk))
    ]
    assert created.plain not in str(list(entries.values()))


def test_inbox_deleted_in_the_admin_is_audited(staff: Client, inbox: Inbox) -> None:
    response = staff.post(_admin_url(Inbox, "delete", inbox.pk), {"post": "yes"})
    assert response.status_code == 302
    assert not Inbox.objects.filter(pk=inbox.pk).exists()
    entries = AuditEntry.objects.filter(workspace=inbox.workspace, action="inbox.deleted")
    assert [(e.actor_type, e.target_id) for e in entries] == [("user", inbox.pk)]

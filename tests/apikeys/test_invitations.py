"""The invitation rules (issue 23, item 3) at the service level: who may invite whom, one pending
invitation per address, the link's secret stored hashed, single use, expiry, the invitee's own
password, and an account joining only when its owner accepts."""

from __future__ import annotations

import hashlib
import threading
from datetime import timedelta

import pytest
import time_machine
from django.contrib.auth import get_user_model
from django.db import connection
from django.utils import timezone

from apikeys import selectors
from apikeys import services as key_services
from apikeys.audit import Actor
from apikeys.exceptions import (
    AccountExists,
    AlreadyInvited,
    AlreadyMember,
    InvitationNotValid,
    InvitationWrongAccount,
    RoleNotAllowed,
)
from apikeys.models import Invitation, Membership, Role
from config.api.errors import Forbidden, NotFound, ValidationFailed
from tests.factories import WorkspaceFactory

pytestmark = pytest.mark.django_db

PASSWORD = "someones-own-pass-3"


def _person(workspace, email: str, role: str = Role.MEMBER, password: str = PASSWORD):  # type: ignore[no-untyped-def]
    user = key_services.user_get_or_create(email=email, password=password)
    return key_services.membership_set(
        workspace=workspace, user=user, role=role, by=Actor.system("tests")
    )


@pytest.fixture
def acme() -> dict[str, Membership]:
    workspace = key_services.workspace_get_or_create(name="Acme")
    return {
        role: _person(workspace, f"{role}@acme.test", role)
        for role in (Role.OWNER, Role.ADMIN, Role.MEMBER)
    }


def test_the_secret_is_stored_hashed_and_the_address_normalised(acme) -> None:  # type: ignore[no-untyped-def]
    with time_machine.travel(timezone.now(), tick=False):  # one instant: the expiry exactly
        created = key_services.invitation_create(
            actor=acme["admin"], email=" Zoe@Example.COM ", role="member", by=Actor.system("tests")
        )
    stored = Invitation.objects.get(pk=created.invitation.pk)
    assert stored.email == "zoe@example.com" and stored.role == "member"
    assert created.plain.startswith("pgi_") and len(created.plain) == 44
    assert stored.digest == hashlib.sha256(created.plain.encode()).hexdigest()
    assert stored.prefix == created.plain[:12]
    assert stored.invited_by == acme["admin"].user
    assert stored.expires_at == stored.created_at + timedelta(hours=72)
    assert selectors.invitation_for_plain(created.plain) == stored
    # The same prefix with another secret is not the invitation.
    forged = created.plain[:12] + "x" * (len(created.plain) - 12)
    with pytest.raises(InvitationNotValid):
        selectors.invitation_for_plain(forged)
    assert not get_user_model().objects.filter(username="zoe@example.com").exists()


def test_who_may_invite_whom(acme) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(RoleNotAllowed):
        key_services.invitation_create(
            actor=acme["admin"], email="x@example.com", role="owner", by=Actor.system("tests")
        )
    with pytest.raises(Forbidden):
        key_services.invitation_create(
            actor=acme["member"], email="x@example.com", role="member", by=Actor.system("tests")
        )
    with pytest.raises(ValidationFailed):
        key_services.invitation_create(
            actor=acme["owner"], email="x@example.com", role="boss", by=Actor.system("tests")
        )
    with pytest.raises(ValidationFailed) as bad:
        key_services.invitation_create(
            actor=acme["owner"], email="not-an-address", role="member", by=Actor.system("tests")
        )
    assert bad.value.issues == [{"path": "email", "message": "Enter the person's e-mail address."}]
    with pytest.raises(AlreadyMember):
        key_services.invitation_create(
            actor=acme["owner"], email="Member@Acme.test", role="admin", by=Actor.system("tests")
        )
    owner_invite = key_services.invitation_create(
        actor=acme["owner"], email="boss@example.com", role="owner", by=Actor.system("tests")
    ).invitation
    with pytest.raises(AlreadyInvited):
        key_services.invitation_create(
            actor=acme["owner"], email="boss@example.com", role="member", by=Actor.system("tests")
        )
    # Admins may not withdraw an invitation to become an owner; owners may.
    with pytest.raises(RoleNotAllowed):
        key_services.invitation_revoke(
            actor=acme["admin"], invitation=owner_invite, by=Actor.system("tests")
        )
    key_services.invitation_revoke(
        actor=acme["owner"], invitation=owner_invite, by=Actor.system("tests")
    )
    assert Invitation.objects.get(pk=owner_invite.pk).state() == "revoked"
    # Withdrawn: the address may be invited again.
    key_services.invitation_create(
        actor=acme["owner"], email="boss@example.com", role="member", by=Actor.system("tests")
    )
    assert Invitation.objects.filter(email="boss@example.com").count() == 2
    assert Invitation.objects.count() == 2


def test_no_workspace_reaches_anothers_invitations(acme) -> None:  # type: ignore[no-untyped-def]
    stranger = _person(WorkspaceFactory(), "stranger@example.com", Role.OWNER)
    theirs = key_services.invitation_create(
        actor=stranger, email="x@example.com", role="member", by=Actor.system("tests")
    ).invitation
    with pytest.raises(NotFound):
        selectors.invitation_get(acme["owner"].workspace, theirs.pk)
    with pytest.raises(NotFound):
        key_services.invitation_revoke(
            actor=acme["owner"], invitation=theirs, by=Actor.system("tests")
        )
    assert Invitation.objects.get(pk=theirs.pk).state() == "pending"
    assert list(selectors.invitation_list_pending(acme["owner"].workspace)) == []


def test_a_new_person_sets_their_own_password_once(acme) -> None:  # type: ignore[no-untyped-def]
    created = key_services.invitation_create(
        actor=acme["admin"], email="new@example.com", role="admin", by=Actor.system("tests")
    )
    with pytest.raises(ValidationFailed) as weak:
        key_services.invitation_accept_new(plain=created.plain, password="short", ip=None)
    assert weak.value.issues and weak.value.issues[0]["path"] == "password"
    membership = key_services.invitation_accept_new(plain=created.plain, password=PASSWORD, ip=None)
    assert membership.workspace == acme["owner"].workspace and membership.role == "admin"
    assert membership.user.check_password(PASSWORD) and membership.user.email == "new@example.com"
    with pytest.raises(InvitationNotValid) as used:
        key_services.invitation_accept_new(plain=created.plain, password="another-pass-99", ip=None)
    assert "already been used" in used.value.message
    membership.user.refresh_from_db()
    assert membership.user.check_password(PASSWORD)


def test_an_existing_account_is_never_given_a_password(acme) -> None:  # type: ignore[no-untyped-def]
    kim = _person(WorkspaceFactory(), "kim@example.com", password="kims-own-password").user
    created = key_services.invitation_create(
        actor=acme["owner"], email="kim@example.com", role="member", by=Actor.system("tests")
    )
    with pytest.raises(AccountExists):
        key_services.invitation_accept_new(
            plain=created.plain, password="hijack-attempt-12", ip=None
        )
    kim.refresh_from_db()
    assert kim.check_password("kims-own-password")
    assert not Membership.objects.filter(user=kim, workspace=acme["owner"].workspace).exists()
    # Only kim, signed in, accepts; someone else signed in cannot.
    with pytest.raises(InvitationWrongAccount):
        key_services.invitation_accept(plain=created.plain, user=acme["member"].user, ip=None)
    joined = key_services.invitation_accept(plain=created.plain, user=kim, ip=None)
    assert joined.user == kim and joined.role == "member"
    assert Invitation.objects.get(pk=created.invitation.pk).accepted_by == kim


def test_expired_and_withdrawn_links_let_nobody_in(acme) -> None:  # type: ignore[no-untyped-def]
    with time_machine.travel(timezone.now() - timedelta(hours=72, seconds=1)):
        old = key_services.invitation_create(
            actor=acme["owner"], email="late@example.com", role="member", by=Actor.system("tests")
        )
    with pytest.raises(InvitationNotValid) as expired:
        key_services.invitation_accept_new(plain=old.plain, password=PASSWORD, ip=None)
    assert "expired" in expired.value.message
    withdrawn = key_services.invitation_create(
        actor=acme["owner"], email="gone@example.com", role="member", by=Actor.system("tests")
    )
    key_services.invitation_revoke(
        actor=acme["admin"], invitation=withdrawn.invitation, by=Actor.system("tests")
    )
    with pytest.raises(InvitationNotValid) as revoked:
        key_services.invitation_accept_new(plain=withdrawn.plain, password=PASSWORD, ip=None)
    assert "withdrawn" in revoked.value.message
    assert not get_user_model().objects.filter(
        username__in=["late@example.com", "gone@example.com"]
    )


def test_an_inviter_who_lost_the_right_lets_nobody_in(acme) -> None:  # type: ignore[no-untyped-def]
    created = key_services.invitation_create(
        actor=acme["admin"], email="friend@example.com", role="admin", by=Actor.system("tests")
    )
    key_services.membership_role_set(
        actor=acme["owner"], membership=acme["admin"], role="member", by=Actor.system("tests")
    )
    with pytest.raises(InvitationNotValid) as void:
        key_services.invitation_accept_new(plain=created.plain, password=PASSWORD, ip=None)
    assert "can no longer add people" in void.value.message


@pytest.mark.django_db(transaction=True)
def test_two_acceptances_at_once_use_the_link_once() -> None:
    workspace = key_services.workspace_get_or_create(name="Race")
    owner = _person(workspace, "owner@race.test", Role.OWNER)
    created = key_services.invitation_create(
        actor=owner, email="racer@example.com", role="member", by=Actor.system("tests")
    )
    barrier, outcomes = threading.Barrier(2), []

    def accept(password: str) -> None:
        barrier.wait()
        try:
            key_services.invitation_accept_new(plain=created.plain, password=password, ip=None)
            outcomes.append(password)
        except (InvitationNotValid, AccountExists) as error:
            outcomes.append(error.code)
        finally:
            connection.close()

    threads = [
        threading.Thread(target=accept, args=(p,)) for p in ("first-own-pass-11", "second-pass-22")
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    winners = [o for o in outcomes if o.endswith(("-11", "-22"))]
    assert len(outcomes) == 2 and len(winners) == 1, outcomes
    user = get_user_model().objects.get(username="racer@example.com")
    assert user.check_password(winners[0])
    assert Membership.objects.filter(user=user).count() == 1

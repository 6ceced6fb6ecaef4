"""People join a workspace by invitation (issue 23, item 3), in a real browser on the live stack:
nobody chooses another person's password, a new person sets their own, and someone with an
account signs in with it and accepts before the workspace appears for them."""

from __future__ import annotations

import email
import hashlib
from collections.abc import Iterator
from datetime import timedelta
from email import policy
from typing import Any

import pytest
import time_machine
from aiosmtpd.controller import Controller
from django.contrib.auth import get_user_model
from django.utils import timezone

from apikeys import services as key_services
from apikeys.audit import Actor
from apikeys.models import Invitation, Membership, Role
from tests.dashboard.conftest import (
    Team,
    add_person,
    allow_console_error,
    login,
    screenshot,
)
from tests.dashboard.test_cross_workspace_takeover import (
    ATTACKER_PASSWORD,
    context_on,
    workspaces_shown,
)
from tests.live import Stack, free_port

KIMS_PASSWORD = "kims-own-password-1"


def _invite(page: Any, address: str, role: str = Role.MEMBER) -> str:
    """Invites ``address`` from the members page; returns the link shown once."""
    page.goto("/members/")
    page.get_by_label("E-mail").fill(address)
    page.get_by_label("Role", exact=True).select_option(role)
    page.get_by_role("button", name="Send invitation").click()
    assert page.get_by_role("status").inner_text() == f"Invited {address} as {role}."
    return page.locator("[data-link]").inner_text().strip()


# --- the attack of issue 23 (see also test_cross_workspace_takeover.py) ---------------------------


def test_the_inviter_never_chooses_the_password(page: Any, browser: Any, stack: Stack, team: Team):
    """The link goes to the inviter; whoever opens it chooses the password and joins the
    inviting workspace only, never a workspace that invited the same address later."""
    beta = key_services.workspace_get_or_create(name="Beta Labs")
    add_person(beta, "owner@beta.test", Role.OWNER)
    login(page, "owner@acme.test")
    acme_link = _invite(page, "alice@corp.test")
    beta_context = context_on(browser, stack.base_url)
    beta_page = beta_context.new_page()
    login(beta_page, "owner@beta.test")
    _invite(beta_page, "alice@corp.test")
    beta_context.close()
    # Acme's owner opens Acme's link and squats alice's account with a password of their own.
    squatter = context_on(browser, stack.base_url)
    squat = squatter.new_page()
    squat.goto(acme_link)
    squat.get_by_label("Choose a password").fill(ATTACKER_PASSWORD)
    squat.get_by_label("Type it again").fill(ATTACKER_PASSWORD)
    squat.get_by_role("button", name="Create my account and join").click()
    squat.locator("[data-user]").wait_for()
    assert workspaces_shown(squat) == ["Acme"]
    assert set(
        Membership.objects.filter(user__username="alice@corp.test").values_list(
            "workspace__name", flat=True
        )
    ) == {"Acme"}
    squatter.close()


# --- a new person ---------------------------------------------------------------------------------


def test_a_new_person_chooses_their_own_password(
    page: Any, browser: Any, stack: Stack, team: Team
) -> None:
    login(page, "admin@acme.test")
    link = _invite(page, "New.Person@Example.com".lower())
    # No relay in this stack: the page says so, and the link is there to pass on.
    assert "Not mailed" in page.locator("[data-not-mailed]").inner_text()
    assert page.locator('tr[data-invitation="new.person@example.com"]').count() == 1
    screenshot(page, "members-invited")
    page.reload()
    assert page.locator("[data-link]").count() == 0  # shown once
    assert page.locator('tr[data-invitation="new.person@example.com"]').count() == 1
    # Stored as a prefix and a hash, never in clear; no account exists yet.
    token = link.rstrip("/").rsplit("/", 1)[1]
    stored = Invitation.objects.get(email="new.person@example.com")
    assert stored.digest == hashlib.sha256(token.encode()).hexdigest()
    assert token not in {stored.prefix, stored.digest} and stored.prefix == token[:12]
    assert not get_user_model().objects.filter(username="new.person@example.com").exists()

    guest_context = context_on(browser, stack.base_url)
    guest = guest_context.new_page()
    guest.goto(link)
    guest.get_by_role("heading", name="Join Acme").wait_for()
    screenshot(guest, "invitation-new-person")
    assert "admin@acme.test invites new.person@example.com" in guest.locator("main").inner_text()
    guest.get_by_label("Choose a password").fill("short")
    guest.get_by_label("Type it again").fill("short")
    guest.get_by_role("button", name="Create my account and join").click()
    assert "too short" in guest.locator(".errorlist").inner_text()
    guest.get_by_label("Choose a password").fill("my-own-secret-pass-8")
    guest.get_by_label("Type it again").fill("my-own-secret-pass-9")
    guest.get_by_role("button", name="Create my account and join").click()
    assert "differ" in guest.locator(".errorlist").inner_text()
    assert not get_user_model().objects.filter(username="new.person@example.com").exists()
    guest.get_by_label("Choose a password").fill("my-own-secret-pass-8")
    guest.get_by_label("Type it again").fill("my-own-secret-pass-8")
    guest.get_by_role("button", name="Create my account and join").click()
    assert guest.get_by_role("status").inner_text() == "Welcome to Acme."
    assert guest.locator("[data-user]").inner_text() == "new.person@example.com"
    membership = Membership.objects.get(user__username="new.person@example.com")
    assert membership.workspace == team.workspace and membership.role == Role.MEMBER
    assert membership.user.check_password("my-own-secret-pass-8")
    guest_context.close()
    # Single use: the link now says so, to anybody.
    page.goto(link)
    assert "already been used" in page.get_by_role("alert").inner_text()
    allow_console_error(page, "410")


# --- someone with an account ----------------------------------------------------------------------


def test_someone_with_an_account_signs_in_and_accepts(
    page: Any, browser: Any, stack: Stack, team: Team
) -> None:
    beta = key_services.workspace_get_or_create(name="Beta Labs")
    kim = add_person(beta, "kim@beta.test", Role.OWNER, password=KIMS_PASSWORD).user
    login(page, "owner@acme.test")
    link = _invite(page, "kim@beta.test", Role.ADMIN)

    kim_context = context_on(browser, stack.base_url)
    kim_page = kim_context.new_page()
    kim_page.goto(link)
    assert "exists already" in kim_page.locator("main").inner_text()
    assert kim_page.get_by_label("Choose a password").count() == 0  # no password to choose
    kim_page.get_by_role("link", name="Sign in to accept").click()
    kim_page.get_by_label("E-mail").fill("kim@beta.test")
    kim_page.get_by_label("Password").fill(KIMS_PASSWORD)
    kim_page.get_by_role("button", name="Sign in").click()
    accept = kim_page.get_by_role("button", name="Accept and join Acme")
    accept.wait_for()
    screenshot(kim_page, "invitation-accept")
    # Not before accepting: Acme is not among kim's workspaces yet.
    assert not Membership.objects.filter(user=kim, workspace=team.workspace).exists()
    assert workspaces_shown(kim_page) == ["Beta Labs"]
    kim_page.goto(link)
    kim_page.get_by_role("button", name="Accept and join Acme").click()
    assert kim_page.get_by_role("status").inner_text() == "Welcome to Acme."
    assert sorted(workspaces_shown(kim_page)) == ["Acme", "Beta Labs"]
    assert Membership.objects.get(user=kim, workspace=team.workspace).role == Role.ADMIN
    kim.refresh_from_db()
    assert kim.check_password(KIMS_PASSWORD)
    kim_context.close()


def test_signed_in_as_someone_else_is_refused(
    page: Any, browser: Any, stack: Stack, team: Team
) -> None:
    add_person(key_services.workspace_get_or_create(name="Beta Labs"), "kim@beta.test")
    login(page, "owner@acme.test")
    link = _invite(page, "kim@beta.test")
    other_context = context_on(browser, stack.base_url)
    other = other_context.new_page()
    login(other, "member@acme.test")
    other.goto(link)
    assert (
        "This invitation is for kim@beta.test, and you are signed in as member@acme.test"
        in other.get_by_role("alert").inner_text()
    )
    assert other.get_by_role("button", name="Accept and join Acme").count() == 0
    # A forged accept (a POST with a valid CSRF token) is refused the same way.
    other.evaluate(
        """(link) => {
            const form = document.createElement('form');
            form.method = 'post';
            form.action = link;
            const token = document.querySelector('[name=csrfmiddlewaretoken]').cloneNode();
            form.appendChild(token);
            document.body.appendChild(form);
            form.submit();
        }""",
        link,
    )
    other.wait_for_load_state()
    assert "This invitation is for kim@beta.test" in other.get_by_role("alert").inner_text()
    assert Invitation.objects.get(email="kim@beta.test").state() == "pending"
    assert not Membership.objects.filter(
        user__username="kim@beta.test", workspace=team.workspace
    ).exists()
    other_context.close()


# --- withdrawn and expired ------------------------------------------------------------------------


def test_withdrawn_and_expired_links_are_refused(page: Any, team: Team) -> None:
    login(page, "owner@acme.test")
    link = _invite(page, "gone@example.com")
    page.once("dialog", lambda dialog: dialog.accept())
    page.locator('tr[data-invitation="gone@example.com"]').get_by_role(
        "button", name="Withdraw"
    ).click()
    assert page.get_by_role("status").inner_text() == "Withdrew the invitation of gone@example.com."
    assert page.locator('tr[data-invitation="gone@example.com"]').count() == 0
    page.goto(link)
    assert "withdrawn" in page.get_by_role("alert").inner_text()
    owner = Membership.objects.get(user=team.owner)
    with time_machine.travel(timezone.now() - timedelta(hours=73)):
        old = key_services.invitation_create(
            actor=owner, email="late@example.com", role="member", by=Actor.system("tests")
        )
    page.goto(f"/invite/{old.plain}/")
    assert "expired" in page.get_by_role("alert").inner_text()
    page.goto("/invite/pgi_not-a-real-link/")
    assert "not valid" in page.get_by_role("alert").inner_text()
    assert not get_user_model().objects.filter(username="late@example.com").exists()
    allow_console_error(page, "410")


# --- mailed through the relay ---------------------------------------------------------------------


class _Relay:
    def __init__(self) -> None:
        self.received: list[tuple[str, list[str], bytes]] = []

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.received.append(
            (envelope.mail_from, list(envelope.rcpt_tos), envelope.original_content)
        )
        return "250 OK"


@pytest.fixture(scope="module")
def relay() -> Iterator[tuple[_Relay, int]]:
    state, port = _Relay(), free_port()
    controller = Controller(state, hostname="127.0.0.1", port=port)
    controller.start()
    yield state, port
    controller.stop()


@pytest.fixture(scope="module")
def mailing_stack(
    django_db_setup: None, django_db_blocker: Any, relay: tuple[_Relay, int]
) -> Iterator[Stack]:
    """A second live stack whose outgoing relay (``EMAIL_URL``) is the SMTP sink above."""
    from django.db import connection

    running = Stack(connection.settings_dict["NAME"])
    for process in {id(running.web): running.web, id(running.smtp): running.smtp}.values():
        process.env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        process.env["EMAIL_URL"] = f"smtp://127.0.0.1:{relay[1]}"
    running.start()
    yield running
    running.stop()


def test_the_link_is_mailed_through_the_relay(
    browser: Any, mailing_stack: Stack, relay: tuple[_Relay, int], team: Team
) -> None:
    sink, _ = relay
    sink.received.clear()
    context = context_on(browser, mailing_stack.base_url)
    owner = context.new_page()
    login(owner, "owner@acme.test")
    link = _invite(owner, "mailed@example.com")
    assert "Mailed to mailed@example.com" in owner.locator("[data-invitation-link]").inner_text()
    assert len(sink.received) == 1
    mail_from, rcpt_tos, raw = sink.received[0]
    assert rcpt_tos == ["mailed@example.com"] and mail_from.startswith("pigeonhole@")
    message = email.message_from_bytes(raw, policy=policy.default)
    assert message["Subject"] == "You are invited to Acme on Pigeonhole"
    body = message.get_content()
    assert link in body and "owner@acme.test invites you" in body
    context.close()
    guest_context = context_on(browser, mailing_stack.base_url)
    guest = guest_context.new_page()
    guest.goto(link)
    guest.get_by_label("Choose a password").fill("mailed-own-pass-5")
    guest.get_by_label("Type it again").fill("mailed-own-pass-5")
    guest.get_by_role("button", name="Create my account and join").click()
    assert guest.get_by_role("status").inner_text() == "Welcome to Acme."
    guest_context.close()

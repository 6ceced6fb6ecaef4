"""Sign-in, password, workspace switching and members, in a real browser on the live stack;
plus the membership rules at the service level."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model

from apikeys import selectors
from apikeys import services as key_services
from apikeys.audit import Actor
from apikeys.exceptions import LastOwner, RoleNotAllowed
from apikeys.models import Membership, Role
from config.api.errors import NotFound
from tests.dashboard.conftest import (
    PASSWORD,
    Team,
    add_person,
    allow_console_error,
    horizontal_overflow,
    login,
    screenshot,
)
from tests.factories import WorkspaceFactory

NEW_PASSWORD = re.compile(r"^New password:?$")  # Django appends a label suffix

# --- in the browser -----------------------------------------------------------------------------


def test_wrong_password_is_refused_in_plain_words(page, team: Team) -> None:
    page.goto("/login/")
    page.get_by_label("E-mail").fill("owner@acme.test")
    page.get_by_label("Password").fill("not-the-password")
    page.get_by_role("button", name="Sign in").click()
    alert = page.get_by_role("alert")
    assert "didn't match" in alert.inner_text()
    assert page.url.endswith("/login/")
    assert page.locator("[data-user]").count() == 0


def test_sign_in_shows_workspace_and_navigation(page, team: Team) -> None:
    page.goto("/members/")
    assert "/login/" in page.url  # anonymous visitors are sent to sign in
    page.get_by_label("E-mail").fill("Owner@Acme.test")  # e-mail is case-insensitive
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.get_by_role("heading", name="Members of Acme").wait_for()
    assert page.locator("[data-user]").inner_text() == "owner@acme.test"
    nav = page.get_by_role("navigation", name="Main")
    for name in ("Overview", "Inboxes", "Approvals", "Keys", "Labels", "Webhooks", "Settings"):
        assert nav.get_by_role("link", name=name).count() == 1, name
    screenshot(page, "members")
    page.goto("/")
    screenshot(page, "home")


def test_switch_workspace(page, team: Team) -> None:
    other = key_services.workspace_get_or_create(name="Beta Labs")
    add_person(other, "owner@acme.test", Role.MEMBER)
    login(page, "owner@acme.test")
    switcher = page.get_by_label("Workspace")
    assert switcher.input_value() == team.workspace.pk
    page.goto("/members/")
    page.get_by_label("Workspace").select_option(label="Beta Labs")
    page.get_by_role("button", name="Switch").click()
    page.get_by_role("heading", name="Members of Beta Labs").wait_for()
    assert page.get_by_role("status").inner_text() == "Switched to Beta Labs."
    assert page.get_by_label("Workspace").input_value() == other.pk
    # A member there: no management forms.
    assert page.get_by_role("button", name="Send invitation").count() == 0


def test_switch_to_a_workspace_one_is_not_in_is_refused(page, team: Team) -> None:
    foreign = WorkspaceFactory(name="Not yours")
    add_person(key_services.workspace_get_or_create(name="Beta Labs"), "owner@acme.test")
    login(page, "owner@acme.test")
    page.get_by_label("Workspace").evaluate(
        "(select, id) => { select.options[1].value = id; }", foreign.pk
    )
    page.get_by_label("Workspace").select_option(index=1)
    page.get_by_role("button", name="Switch").click()
    assert page.get_by_role("alert").inner_text() == "You are not a member of that workspace."
    assert page.get_by_label("Workspace").input_value() == team.workspace.pk


def test_change_password_then_sign_in_with_it(page, team: Team) -> None:
    login(page, "member@acme.test")
    page.get_by_role("link", name="Password").click()
    page.get_by_label("Old password").fill(PASSWORD)
    page.get_by_label(NEW_PASSWORD).fill("a-brand-new-secret-42")
    page.get_by_label("New password confirmation").fill("a-brand-new-secret-42")
    page.get_by_role("button", name="Change password").click()
    page.get_by_role("heading", name="Password changed").wait_for()
    page.get_by_role("button", name="Sign out").click()
    page.get_by_role("heading", name="Sign in to Pigeonhole").wait_for()
    login(page, "member@acme.test", "a-brand-new-secret-42")
    assert page.locator("[data-user]").inner_text() == "member@acme.test"


def test_password_change_errors_are_shown(page, team: Team) -> None:
    login(page, "member@acme.test")
    page.goto("/password/")
    page.get_by_label("Old password").fill("wrong")
    page.get_by_label(NEW_PASSWORD).fill("a-brand-new-secret-42")
    page.get_by_label("New password confirmation").fill("something-else-42")
    page.get_by_role("button", name="Change password").click()
    errors = page.locator(".errorlist").all_inner_texts()
    assert any("old password was entered incorrectly" in e for e in errors), errors
    assert any("didn’t match" in e or "didn't match" in e for e in errors), errors


def test_owner_invites_and_changes_a_role(page, team: Team) -> None:
    login(page, "owner@acme.test")
    page.goto("/members/")
    assert page.get_by_label("First password").count() == 0  # nobody sets another's password
    page.get_by_label("E-mail").fill("New.Person@Example.com")
    page.get_by_label("Role", exact=True).select_option("admin")
    page.get_by_role("button", name="Send invitation").click()
    assert page.get_by_role("status").inner_text() == "Invited new.person@example.com as admin."
    pending = page.locator('tr[data-invitation="new.person@example.com"]')
    assert "admin" in pending.inner_text() and "owner@acme.test" in pending.inner_text()
    assert page.locator('tr[data-member="new.person@example.com"]').count() == 0
    row = page.locator('tr[data-member="member@acme.test"]')
    row.get_by_label("Role of member@acme.test").select_option("admin")
    row.get_by_role("button", name="Change role").click()
    assert page.get_by_role("status").inner_text() == "member@acme.test is now admin."
    assert Membership.objects.get(user=team.member).role == Role.ADMIN
    assert not get_user_model().objects.filter(username="new.person@example.com").exists()


def test_invite_form_errors_in_plain_words(page, team: Team) -> None:
    login(page, "owner@acme.test")
    page.goto("/members/")
    page.get_by_label("E-mail").fill("nobody-at-example.com")
    page.get_by_role("button", name="Send invitation").click()
    assert "valid email" in page.locator(".errorlist").inner_text()
    page.get_by_label("E-mail").fill("member@acme.test")
    page.get_by_role("button", name="Send invitation").click()
    assert "already a member" in page.locator(".errorlist").inner_text()
    page.get_by_label("E-mail").fill("twice@example.com")
    page.get_by_role("button", name="Send invitation").click()
    page.get_by_label("E-mail").fill("twice@example.com")
    page.get_by_role("button", name="Send invitation").click()
    assert "already waiting" in page.locator(".errorlist").inner_text()
    assert not get_user_model().objects.filter(username="twice@example.com").exists()


def test_remove_member_asks_first(page, team: Team) -> None:
    login(page, "admin@acme.test")
    page.goto("/members/")
    row = page.locator('tr[data-member="member@acme.test"]')
    page.once("dialog", lambda dialog: dialog.dismiss())
    row.get_by_role("button", name="Remove").click()
    assert Membership.objects.filter(user=team.member).exists()
    questions: list[str] = []
    page.once("dialog", lambda dialog: (questions.append(dialog.message), dialog.accept()))
    row.get_by_role("button", name="Remove").click()
    assert page.get_by_role("status").inner_text() == "Removed member@acme.test from Acme."
    assert questions == ["Remove member@acme.test from Acme?"]
    assert not Membership.objects.filter(user=team.member).exists()


def test_the_last_owner_cannot_be_removed_or_demoted(page, team: Team) -> None:
    login(page, "owner@acme.test")
    page.goto("/members/")
    row = page.locator('tr[data-member="owner@acme.test"]')
    page.on("dialog", lambda dialog: dialog.accept())
    row.get_by_role("button", name="Remove").click()
    assert "at least one owner" in page.get_by_role("alert").inner_text()
    row = page.locator('tr[data-member="owner@acme.test"]')
    row.get_by_label("Role of owner@acme.test").select_option("admin")
    row.get_by_role("button", name="Change role").click()
    assert "at least one owner" in page.get_by_role("alert").inner_text()
    assert Membership.objects.get(user=team.owner).role == Role.OWNER


def test_admin_cannot_touch_owners(page, team: Team) -> None:
    login(page, "admin@acme.test")
    page.goto("/members/")
    owner_row = page.locator('tr[data-member="owner@acme.test"]')
    assert owner_row.get_by_role("button").count() == 0
    options = page.get_by_label("Role of member@acme.test").locator("option").all_inner_texts()
    assert [o.lower() for o in options] == ["admin", "member"]


def test_member_sees_members_but_cannot_manage(page, team: Team) -> None:
    login(page, "member@acme.test")
    page.goto("/members/")
    assert page.locator("tr[data-member]").count() == 3
    assert page.get_by_role("button", name="Send invitation").count() == 0
    assert page.get_by_role("heading", name="Pending invitations").count() == 0
    assert page.get_by_role("button", name="Remove").count() == 0
    # Forge the owner's remove form anyway: the server answers the plain-words 403 page.
    target = Membership.objects.get(user=team.owner).pk
    page.locator("form.inline-form").first.evaluate(
        "(form, action) => { form.action = action; form.submit(); }",
        f"/members/{target}/remove/",
    )
    page.get_by_role("heading", name="You can't do that here").wait_for()
    assert "Only admins and owners of Acme can do this. Your role there is member." in (
        page.locator("[data-forbidden]").inner_text()
    )
    allow_console_error(page, "403")
    assert Membership.objects.filter(user=team.owner).exists()


def test_user_without_workspace_gets_plain_words(page, transactional_db) -> None:
    key_services.user_get_or_create(email="loner@example.com", password=PASSWORD)
    login(page, "loner@example.com")
    assert "not in any workspace" in page.get_by_role("heading", level=2).inner_text()
    page.goto("/members/")
    assert "not a member of any workspace" in page.locator("main").inner_text()
    allow_console_error(page, "403")


def test_keyboard_reaches_skip_link_and_navigation(page, team: Team) -> None:
    login(page, "owner@acme.test")
    page.goto("/members/")
    page.keyboard.press("Tab")
    focused = page.evaluate("() => document.activeElement.textContent.trim()")
    assert focused == "Skip to content"
    assert page.evaluate("() => document.activeElement.getBoundingClientRect().top >= 0")
    page.keyboard.press("Enter")
    assert page.evaluate("() => location.hash") == "#content"
    page.keyboard.press("Shift+Tab")  # back into the page's chrome
    seen = []
    page.locator(".brand").focus()
    for _ in range(11):
        page.keyboard.press("Tab")
        seen.append(page.evaluate("() => document.activeElement.textContent.trim()"))
    assert seen[:10] == [
        "Overview",
        "Inboxes",
        "Domains",
        "Approvals",
        "Keys",
        "Connect an agent",
        "Labels",
        "Webhooks",
        "Members",
        "Settings",
    ]
    outline = page.evaluate("() => getComputedStyle(document.activeElement).outlineStyle")
    assert outline == "solid"  # a visible focus ring


@pytest.mark.parametrize("path", ["/login/", "/members/", "/password/", "/"])
def test_phone_width_has_no_horizontal_overflow(page, team: Team, path: str) -> None:
    if path != "/login/":
        login(page, "owner@acme.test")
    page.set_viewport_size({"width": 375, "height": 812})
    page.goto(path)
    assert horizontal_overflow(page) <= 0


def test_dashboard_pages_carry_the_content_security_policy(page, team: Team) -> None:
    response = page.goto("/login/")
    policy = response.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "frame-ancestors 'none'" in policy
    docs = page.request.get("/api/docs")
    assert docs.status == 200 and "content-security-policy" not in docs.headers


# --- the membership rules -----------------------------------------------------------------------


@pytest.fixture
def acme(db: None) -> dict[str, Membership]:
    workspace = key_services.workspace_get_or_create(name="Acme")
    return {
        role: add_person(workspace, f"{role}@acme.test", role)
        for role in (Role.OWNER, Role.ADMIN, Role.MEMBER)
    }


def test_only_owners_grant_or_take_the_owner_role(acme: dict[str, Membership]) -> None:
    with pytest.raises(RoleNotAllowed):
        key_services.membership_role_set(
            actor=acme["admin"], membership=acme["member"], role="owner", by=Actor.system("tests")
        )
    with pytest.raises(RoleNotAllowed):
        key_services.membership_role_set(
            actor=acme["admin"], membership=acme["owner"], role="member", by=Actor.system("tests")
        )
    with pytest.raises(RoleNotAllowed):
        key_services.membership_remove(
            actor=acme["admin"], membership=acme["owner"], by=Actor.system("tests")
        )
    promoted = key_services.membership_role_set(
        actor=acme["owner"], membership=acme["admin"], role="owner", by=Actor.system("tests")
    )
    assert promoted.role == "owner"
    # With two owners, one may step down.
    key_services.membership_role_set(
        actor=acme["owner"], membership=acme["owner"], role="member", by=Actor.system("tests")
    )
    assert Membership.objects.get(pk=acme["owner"].pk).role == "member"


def test_last_owner_stays(acme: dict[str, Membership]) -> None:
    with pytest.raises(LastOwner):
        key_services.membership_role_set(
            actor=acme["owner"], membership=acme["owner"], role="admin", by=Actor.system("tests")
        )
    with pytest.raises(LastOwner):
        key_services.membership_remove(
            actor=acme["owner"], membership=acme["owner"], by=Actor.system("tests")
        )
    assert Membership.objects.get(pk=acme["owner"].pk).role == "owner"


def test_managers_remove_members_but_not_across_workspaces(acme: dict[str, Membership]) -> None:
    key_services.membership_remove(
        actor=acme["admin"], membership=acme["member"], by=Actor.system("tests")
    )
    assert not Membership.objects.filter(pk=acme["member"].pk).exists()
    stranger = add_person(WorkspaceFactory(), "stranger@example.com", Role.OWNER)
    with pytest.raises(NotFound):
        key_services.membership_remove(
            actor=acme["owner"], membership=stranger, by=Actor.system("tests")
        )
    with pytest.raises(NotFound):
        selectors.membership_get(acme["owner"].workspace, stranger.pk)
    assert Membership.objects.filter(pk=stranger.pk).exists()

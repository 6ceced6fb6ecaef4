"""The cross-workspace takeover of issue 23 (item 3), in a real browser on the live stack: Acme's
owner added alice@corp.test with a password of their choosing; when Beta's owner added the same
address later, the existing account was reused with that password, and Acme's owner signed in as
alice and read Beta's mail. Adding a person now creates an invitation: nobody chooses another
person's password, and nobody is let in before accepting.

The helpers here are shared with test_invitations.py; this module uses only what existed before
the fix, so that it runs (and fails) against 532b332 too.
"""

from __future__ import annotations

from typing import Any

from apikeys import services as key_services
from apikeys.models import Membership, Role
from tests.dashboard.conftest import DESKTOP, Team, add_person, login
from tests.live import Stack

ATTACKER_PASSWORD = "chosen-by-acme-owner-1"


def context_on(browser: Any, base_url: str) -> Any:
    context = browser.new_context(base_url=base_url, viewport=DESKTOP)
    context.set_default_timeout(10_000)
    return context


def add_with_password(page: Any, address: str, role: str, password: str) -> None:
    """Submits the members page's add form for ``address`` with a password of the inviter's
    choosing: typed into the form's password field where there is one (main at 532b332), sent as
    a crafted field where there is none (what a hostile admin would do)."""
    page.goto("/members/")
    form = page.locator('form[action="/members/add/"]')
    form.get_by_label("E-mail").fill(address)
    form.get_by_label("Role", exact=True).select_option(role)
    form.evaluate(
        """(form, password) => {
            let field = form.querySelector('[name=password]');
            if (!field) {
                field = document.createElement('input');
                field.type = 'hidden';
                field.name = 'password';
                form.appendChild(field);
            }
            field.value = password;
        }""",
        password,
    )
    form.locator("button[type=submit]").click()
    page.wait_for_load_state()


def workspaces_shown(page: Any) -> list[str]:
    """The workspaces the top bar offers the signed-in person."""
    page.goto("/")
    switcher = page.locator("#workspace-switch option")
    if switcher.count():
        return switcher.all_inner_texts()
    single = page.locator(".workspace-name")
    return [single.inner_text()] if single.count() else []


def _sign_in_fails(page: Any, address: str, password: str) -> None:
    page.goto("/login/")
    page.get_by_label("E-mail").fill(address)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Sign in").click()
    page.locator('[role="alert"], [data-user]').first.wait_for()
    signed_in = page.locator("[data-user]").count() == 1
    assert not signed_in, (
        f"signed in as {address} with a password the inviter chose; "
        f"workspaces shown: {workspaces_shown(page)}"
    )
    assert "didn't match" in page.get_by_role("alert").inner_text()


def test_one_workspaces_admin_cannot_get_into_another_workspace(
    page: Any, browser: Any, stack: Stack, team: Team
) -> None:
    beta = key_services.workspace_get_or_create(name="Beta Labs")
    add_person(beta, "owner@beta.test", Role.OWNER)
    # Acme's owner adds alice@corp.test with a password of their own choosing.
    login(page, "owner@acme.test")
    add_with_password(page, "alice@corp.test", Role.MEMBER, ATTACKER_PASSWORD)
    # Later Beta's owner adds the same person to Beta.
    beta_context = context_on(browser, stack.base_url)
    beta_page = beta_context.new_page()
    login(beta_page, "owner@beta.test")
    add_with_password(beta_page, "alice@corp.test", Role.MEMBER, "")
    beta_context.close()
    # Acme's owner now tries to sign in as alice with the password they chose.
    attacker = context_on(browser, stack.base_url)
    attacker_page = attacker.new_page()
    _sign_in_fails(attacker_page, "alice@corp.test", ATTACKER_PASSWORD)
    assert not Membership.objects.filter(user__username="alice@corp.test").exists()
    attacker.close()
    # What both owners made are invitations, each waiting for alice herself.
    beta_context = context_on(browser, stack.base_url)
    beta_page = beta_context.new_page()
    login(beta_page, "owner@beta.test")
    for inviter in (page, beta_page):
        inviter.goto("/members/")
        assert inviter.locator('tr[data-invitation="alice@corp.test"]').count() == 1
        assert inviter.locator('tr[data-member="alice@corp.test"]').count() == 0
    beta_context.close()

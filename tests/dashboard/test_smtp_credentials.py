"""Sandbox SMTP credentials on the inbox's page, in a real browser on the live stack: create
one, see its password once with the app settings to copy, the password works (the receiver's
own login check), revoke it; a member may manage them too, another workspace's inbox is not
found."""

from __future__ import annotations

from playwright.sync_api import expect

from apikeys.audit import Actor
from inboxes import selectors as inbox_selectors
from inboxes import services as inbox_services
from inboxes.models import SmtpCredential
from tests.dashboard.conftest import (
    Team,
    allow_console_error,
    horizontal_overflow,
    login,
    screenshot,
)
from tests.factories import WorkspaceFactory


def test_create_show_once_copy_settings_and_revoke(page, team: Team) -> None:
    inbox = inbox_services.inbox_create(workspace=team.workspace, local_part="signup-tests")
    login(page, "member@acme.test")
    page.goto(f"/inboxes/{inbox.pk}/")
    section = page.locator("#smtp-credentials")
    expect(section.get_by_text("No SMTP credentials yet.")).to_be_visible()
    section.get_by_label("Note (optional)").fill("checkout app")
    section.get_by_role("button", name="Create SMTP credential").click()

    password_box = page.locator("[data-smtp-password]")
    expect(password_box).to_be_visible()
    password = password_box.locator("code").inner_text().strip()
    [credential] = SmtpCredential.objects.filter(workspace=team.workspace, inbox=inbox)
    assert credential.name == "checkout app"
    assert credential.username.startswith("signup-tests-")
    row = page.locator(f'tr[data-credential="{credential.pk}"]')
    expect(row).to_contain_text(credential.username)
    expect(row).to_contain_text("never")
    # The password shown is the credential's (what the SMTP receiver checks at AUTH), and only
    # its digest is stored.
    assert inbox_selectors.smtp_credential_for_login(credential.username, password) == credential
    assert password not in credential.digest
    # The app settings, each copyable.
    settings_box = page.locator("[data-smtp-settings]")
    expect(settings_box).to_contain_text("pigeonhole.test")
    copy_buttons = settings_box.locator("[data-copy]")
    assert copy_buttons.count() >= 2
    expect(row.locator(f'[data-copy="{credential.username}"]')).to_be_visible()
    expect(password_box.locator(f'[data-copy="{password}"]')).to_be_visible()
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    row.get_by_role("button", name=f"Copy username {credential.username}").click()
    assert page.evaluate("() => navigator.clipboard.readText()") == credential.username
    screenshot(page, "inbox-smtp-credentials")
    assert horizontal_overflow(page) == 0

    # Shown once: a reload no longer has it.
    page.reload()
    expect(page.locator("[data-smtp-password]")).to_have_count(0)
    assert password not in page.content()

    page.once("dialog", lambda dialog: dialog.accept())
    row.get_by_role("button", name=f"Revoke {credential.username}").click()
    expect(page.get_by_role("status")).to_have_text(
        f"Revoked the SMTP credential {credential.username}."
    )
    credential.refresh_from_db()
    assert credential.revoked_at is not None
    assert inbox_selectors.smtp_credential_for_login(credential.username, password) is None
    expect(
        page.locator("#smtp-credentials").get_by_text("No SMTP credentials yet.")
    ).to_be_visible()


def test_another_workspaces_credentials_are_not_reachable(page, team: Team) -> None:
    other = WorkspaceFactory(name="Elsewhere")
    inbox = inbox_services.inbox_create(workspace=other, local_part="theirs")
    created = inbox_services.smtp_credential_create(inbox=inbox, by=Actor.system("tests"))
    login(page, "owner@acme.test")
    csrf = {c["name"]: c["value"] for c in page.context.cookies()}.get("csrftoken", "")
    response = page.request.post(
        f"/inboxes/{inbox.pk}/smtp-credentials/{created.credential.pk}/revoke/",
        headers={"X-CSRFToken": csrf},
    )
    assert response.status == 404
    created.credential.refresh_from_db()
    assert created.credential.revoked_at is None
    assert page.goto(f"/inboxes/{inbox.pk}/").status == 404
    allow_console_error(page, "404")

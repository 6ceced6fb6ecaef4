"""API keys and workspace settings in a real browser on the live stack, checked through the API:
a key created in the dashboard works at once, its secret is shown exactly once, revoking and
approval changes reach the API, settings reach /me and sends; members are refused."""

from __future__ import annotations

import httpx
import pytest
from django.contrib.sessions.models import Session
from django.test import Client

from apikeys import services as key_services
from apikeys.audit import Actor
from apikeys.models import ApiKey, Role, Workspace
from tests.dashboard.conftest import (
    Team,
    add_person,
    allow_console_error,
    horizontal_overflow,
    login,
    screenshot,
)
from tests.factories import WorkspaceFactory


def _api(stack, plain: str, path: str, method: str = "GET", **kwargs):  # type: ignore[no-untyped-def]
    return httpx.request(
        method,
        f"{stack.base_url}/api/v1/{path}",
        headers={"Authorization": f"Bearer {plain}"},
        timeout=10,
        **kwargs,
    )


def _admin_key(workspace: Workspace) -> str:
    return key_services.api_key_create(
        workspace=workspace, name="test admin", scopes=("admin",), by=Actor.system("tests")
    ).plain


def _forge_post(page, action: str, fields: dict[str, str | list[str]]) -> None:  # type: ignore[no-untyped-def]
    """Submits a hand-made form (with the page's CSRF token) to ``action``, as a crafted request."""
    page.evaluate(
        """([action, fields]) => {
            const form = document.createElement("form");
            form.method = "post";
            form.action = action;
            const token = document.querySelector("input[name=csrfmiddlewaretoken]").value;
            const add = (name, value) => {
                const input = document.createElement("input");
                input.type = "hidden"; input.name = name; input.value = value;
                form.appendChild(input);
            };
            add("csrfmiddlewaretoken", token);
            for (const [name, value] of Object.entries(fields)) {
                (Array.isArray(value) ? value : [value]).forEach((v) => add(name, v));
            }
            document.body.appendChild(form);
            form.submit();
        }""",
        [action, fields],
    )


# --- keys in the browser ------------------------------------------------------------------------


def test_create_a_key_read_it_once_use_it_toggle_approval_and_revoke(
    page, stack, team: Team
) -> None:
    admin_plain = _admin_key(team.workspace)
    login(page, "owner@acme.test")
    page.goto("/keys/")
    page.get_by_role("heading", name="API keys of Acme").wait_for()
    # The bootstrap-like admin key is listed, never with its secret.
    assert page.locator("tr[data-key]").count() == 1
    assert admin_plain not in page.content()

    page.get_by_label("Name").fill("ci runner")
    page.get_by_label("Kind").select_option("ci")
    page.get_by_label("write:").uncheck()
    page.get_by_label("send:").check()
    page.get_by_label("Expires after (days)").fill("30")
    page.get_by_role("button", name="Create key").click()

    page.get_by_role("heading", name="Your new key “ci runner”").wait_for()
    warning = page.get_by_role("alert").inner_text()
    assert "only time the key is shown" in warning
    plain = page.locator("[data-plain-key]").inner_text().strip()
    assert plain.startswith("pgh_") and len(plain) == 44
    copy = page.get_by_role("button", name="Copy key")
    assert copy.get_attribute("data-copy") == plain
    assert plain not in page.url
    screenshot(page, "key-created")

    # The key works against the API at once, with exactly the scopes chosen.
    me = _api(stack, plain, "me")
    assert me.status_code == 200, me.text
    body = me.json()
    assert body["type"] == "api_key" and body["key"]["name"] == "ci runner"
    assert body["key"]["kind"] == "ci" and body["key"]["scopes"] == ["read", "send"]
    assert body["scopes"] == ["read", "send"] and body["key"]["require_approval"] is False
    assert body["key"]["expires_at"] is not None
    key_id = body["key"]["id"]

    # Shown once: a reload (and every other page) no longer has it, nor does any session.
    page.reload()
    page.locator("[data-key-gone]").wait_for()
    assert plain not in page.content()
    assert page.locator("[data-plain-key]").count() == 0
    for session in Session.objects.all():
        assert plain not in str(session.get_decoded())
    page.get_by_role("link", name="Back to API keys").click()
    row = page.locator(f'tr[data-key="{key_id}"]')
    row.wait_for()
    assert plain not in page.content()
    assert "ci runner" in row.inner_text() and plain[:12] in row.inner_text()
    assert row.locator("[data-scopes]").inner_text().split() == ["read", "send"]
    # Last used: the /me call above (a relative time), not "never".
    assert row.locator("td").nth(6).locator("time[data-relative]").count() == 1
    screenshot(page, "keys")

    # Approval on, then off again; the API sees each change.
    row.get_by_role("button", name="Require approval for ci runner").click()
    assert (
        page.get_by_role("status").inner_text()
        == "Mail sent with ci runner now waits for approval."
    )
    listed = {k["id"]: k for k in _api(stack, admin_plain, "keys").json()["data"]}
    assert listed[key_id]["require_approval"] is True
    assert _api(stack, plain, "me").json()["key"]["require_approval"] is True
    assert (
        "waits for approval"
        in page.locator(f'tr[data-key="{key_id}"] [data-approval]').inner_text()
    )
    page.locator(f'tr[data-key="{key_id}"]').get_by_role(
        "button", name="Send directly with ci runner"
    ).click()
    assert page.get_by_role("status").inner_text() == (
        "Mail sent with ci runner no longer waits for approval."
    )
    listed = {k["id"]: k for k in _api(stack, admin_plain, "keys").json()["data"]}
    assert listed[key_id]["require_approval"] is False

    # Revoke asks first; dismissing keeps the key.
    page.once("dialog", lambda dialog: dialog.dismiss())
    page.locator(f'tr[data-key="{key_id}"]').get_by_role("button", name="Revoke ci runner").click()
    assert _api(stack, plain, "me").status_code == 200
    questions: list[str] = []
    page.once("dialog", lambda dialog: (questions.append(dialog.message), dialog.accept()))
    page.locator(f'tr[data-key="{key_id}"]').get_by_role("button", name="Revoke ci runner").click()
    assert page.get_by_role("status").inner_text() == (
        "Revoked ci runner. Requests with it are now refused."
    )
    assert questions == ["Revoke ci runner? Anything using it stops working at once."]
    revoked = _api(stack, plain, "me")
    assert revoked.status_code == 401
    assert revoked.json()["error"]["code"] == "unauthorized"
    assert page.locator(f'tr[data-key="{key_id}"]').count() == 0
    page.get_by_text("Revoked keys (1)").click()
    assert "revoked" in page.locator(f'tr[data-revoked-key="{key_id}"]').inner_text()
    assert _api(stack, admin_plain, "me").status_code == 200  # the other key is untouched


def test_copy_button_puts_the_key_on_the_clipboard_by_keyboard(page, team: Team) -> None:
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    login(page, "admin@acme.test")
    page.goto("/keys/")
    page.get_by_label("Name").focus()
    page.keyboard.type("keyboard key")
    page.keyboard.press("Enter")  # the form submits from the keyboard
    page.get_by_role("heading", name="Your new key “keyboard key”").wait_for()
    plain = page.locator("[data-plain-key]").inner_text().strip()
    button = page.get_by_role("button", name="Copy key")
    button.focus()
    page.keyboard.press("Enter")
    page.get_by_role("button", name="Copied").wait_for()
    assert page.evaluate("() => navigator.clipboard.readText()") == plain
    created = ApiKey.objects.get(name="keyboard key")
    assert created.scopes == ["read", "write"] and created.kind == "agent"  # the API's defaults
    assert created.expires_at is None and created.require_approval is False
    assert created.created_by == team.admin


def test_scope_hints_and_form_errors_in_plain_words(page, team: Team) -> None:
    login(page, "owner@acme.test")
    page.goto("/keys/")
    assert "No active API keys yet" in page.locator(".empty").inner_text()
    screenshot(page, "keys-empty")
    page.get_by_label("read:").uncheck()
    page.get_by_label("write:").uncheck()
    page.get_by_label("admin:").check()
    hints = page.locator(".key-form .implied").all_inner_texts()
    assert hints.count("(included with admin)") == 3, hints
    page.get_by_label("admin:").uncheck()
    page.get_by_label("Expires after (days)").fill("0")
    page.get_by_role("button", name="Create key").click()
    errors = " ".join(page.locator(".errorlist").all_inner_texts())
    assert "This field is required." in errors  # name
    assert "Choose at least one scope." in errors
    assert "greater than or equal to 1" in errors
    assert not ApiKey.objects.filter(workspace=team.workspace).exists()
    assert horizontal_overflow(page) <= 0


def test_member_cannot_see_or_create_keys(page, stack, team: Team) -> None:
    login(page, "member@acme.test")
    page.goto("/keys/")
    page.get_by_role("heading", name="You can't do that here").wait_for()
    assert "Only admins and owners of Acme can do this. Your role there is member." in (
        page.locator("[data-forbidden]").inner_text()
    )
    allow_console_error(page, "403")
    # A crafted create is refused by the server too.
    _forge_post(page, "/keys/new/", {"name": "sneaky", "scopes": ["admin"], "kind": "agent"})
    page.get_by_role("heading", name="You can't do that here").wait_for()
    allow_console_error(page, "403")
    assert not ApiKey.objects.filter(name="sneaky").exists()
    # The API agrees: a member's session lacks the admin scope /keys needs.
    page.goto("/settings/")
    listed = page.request.get("/api/v1/keys")
    assert listed.status == 403 and listed.json()["error"]["code"] == "insufficient_scope"


# --- settings in the browser --------------------------------------------------------------------


def test_admin_turns_on_approval_for_all_mail_and_the_api_follows(page, stack, team: Team) -> None:
    plain = _admin_key(team.workspace)
    inbox = _api(stack, plain, "inboxes", "POST", json={"local_part": "outgoing"}).json()
    assert _api(stack, plain, "me").json()["workspace"]["require_approval"] is False
    login(page, "admin@acme.test")
    page.get_by_role("link", name="Settings").click()
    page.get_by_role("heading", name="Settings of Acme").wait_for()
    main = page.get_by_role("main")  # (the navigation names them too, for owners and admins)
    assert main.get_by_role("link", name="Members").get_attribute("href") == "/members/"
    assert main.get_by_role("link", name="Domains").get_attribute("href") == "/domains/"
    quota = page.locator("[data-inbox-quota]").inner_text()
    assert " ".join(quota.split()) == "1 (no limit)"
    approval = page.get_by_label("Every email sent from this workspace waits for approval")
    assert not approval.is_checked()
    screenshot(page, "settings")

    approval.check()
    page.get_by_label("Permanent inboxes allowed").uncheck()
    page.get_by_label("Workspace name").fill("Acme Robotics")
    page.get_by_role("button", name="Save settings").click()
    assert page.get_by_role("status").inner_text() == (
        "Settings saved. They apply to the API at once."
    )
    page.get_by_role("heading", name="Settings of Acme Robotics").wait_for()
    assert page.get_by_label("Every email sent from this workspace waits for approval").is_checked()

    me = _api(stack, plain, "me").json()
    assert me["workspace"]["require_approval"] is True
    assert me["workspace"]["name"] == "Acme Robotics"
    assert me["entitlements"]["permanent_inboxes"] is False
    assert me["entitlements"]["classifier"] is True
    sent = _api(
        stack,
        plain,
        f"inboxes/{inbox['id']}/send",
        "POST",
        json={"to": ["someone@example.com"], "subject": "Hello", "text": "Hi"},
    )
    assert sent.status_code == 202 and sent.json()["status"] == "pending"
    permanent = _api(stack, plain, "inboxes", "POST", json={"ttl_minutes": None})
    assert permanent.status_code == 403
    assert permanent.json()["error"]["code"] == "feature_disabled"


def test_settings_errors_in_plain_words(page, team: Team) -> None:
    login(page, "owner@acme.test")
    page.goto("/settings/")
    page.get_by_label("Workspace name").fill("   ")
    page.get_by_label("Classifier answers the questions of labels with instructions").uncheck()
    page.get_by_role("button", name="Save settings").click()
    assert "This field is required." in page.locator(".errorlist").inner_text()
    workspace = Workspace.objects.get(pk=team.workspace.pk)
    assert workspace.name == "Acme" and workspace.classifier_enabled is True


def test_member_reads_settings_but_cannot_change_them(page, team: Team) -> None:
    login(page, "member@acme.test")
    page.goto("/settings/")
    page.get_by_role("heading", name="Settings of Acme").wait_for()
    assert "Only owners and admins can change these settings" in (
        page.locator("[data-read-only]").inner_text()
    )
    assert "off" in page.locator('[data-setting="require_approval"]').inner_text()
    assert page.get_by_role("button", name="Save settings").count() == 0
    assert page.get_by_role("link", name="API keys").count() == 0
    screenshot(page, "settings-member")
    _forge_post(
        page,
        "/settings/save/",
        {"name": "Taken over", "require_approval": "on", "allow_permanent_inboxes": "on"},
    )
    page.get_by_role("heading", name="You can't do that here").wait_for()
    allow_console_error(page, "403")
    workspace = Workspace.objects.get(pk=team.workspace.pk)
    assert workspace.name == "Acme" and workspace.require_approval is False


@pytest.mark.parametrize("path", ["/keys/", "/settings/", "created"])
def test_phone_width_has_no_horizontal_overflow(page, team: Team, path: str) -> None:
    created = key_services.api_key_create(
        workspace=team.workspace,
        name="a key with a rather long name for a phone",
        scopes=("admin",),
        expires_in_days=7,
        require_approval=True,
        by=Actor.system("tests"),
    )
    login(page, "owner@acme.test")
    page.set_viewport_size({"width": 375, "height": 812})
    if path == "created":
        page.goto("/keys/")
        page.get_by_label("Name").fill("phone key")
        page.get_by_role("button", name="Create key").click()
        page.locator("[data-plain-key]").wait_for()
    else:
        page.goto(path)
    assert horizontal_overflow(page) <= 0
    assert created.plain not in page.content()


# --- the views, server side -----------------------------------------------------------------------


@pytest.fixture
def owner_client(db: None) -> tuple[Client, Workspace]:
    workspace = key_services.workspace_get_or_create(name="Acme")
    owner = add_person(workspace, "owner@acme.test", Role.OWNER).user
    client = Client()
    client.force_login(owner)
    return client, workspace


def test_the_plain_key_leaves_the_session_on_its_one_display(
    owner_client: tuple[Client, Workspace],
) -> None:
    client, workspace = owner_client
    response = client.post("/keys/new/", {"name": "once", "kind": "agent", "scopes": ["read"]})
    assert response.status_code == 302
    key = ApiKey.objects.get(workspace=workspace, name="once")
    assert response["Location"] == f"/keys/{key.pk}/created/"
    shown = client.get(response["Location"])
    plain = shown.context["plain"]
    assert plain.startswith(key.prefix) and plain in shown.content.decode()
    assert "no-store" in shown["Cache-Control"]
    assert all(plain not in str(v) for v in client.session.values())
    again = client.get(response["Location"])
    assert again.context["plain"] is None and plain not in again.content.decode()


def test_other_workspaces_keys_are_not_found(owner_client: tuple[Client, Workspace]) -> None:
    client, _ = owner_client
    foreign = key_services.api_key_create(
        workspace=WorkspaceFactory(), name="theirs", by=Actor.system("tests")
    ).key
    for action in ("revoke", "approval"):
        response = client.post(f"/keys/{foreign.pk}/{action}/", {"require_approval": "on"})
        assert response.status_code == 404
    assert client.get(f"/keys/{foreign.pk}/created/").status_code == 404
    foreign.refresh_from_db()
    assert foreign.revoked_at is None and foreign.require_approval is False

"""Inboxes, domains and mail in the dashboard, in a real browser on the live stack (daphne +
smtpd): create an inbox, watch mail arrive live, read the code, label, search, extend, delete,
and what a member may not do."""

from __future__ import annotations

import re
import smtplib
from datetime import timedelta

from django.utils import timezone
from playwright.sync_api import expect

from apikeys.audit import Actor
from inboxes import services as inbox_services
from inboxes.models import Domain, Inbox
from labels import services as label_services
from labels.models import EmailLabel
from mail.models import Email
from mail.pipeline import receive_one
from tests.dashboard.conftest import (
    Team,
    allow_console_error,
    horizontal_overflow,
    login,
    screenshot,
)
from tests.dns_server import DnsServer


def send(port: int, to: str, subject: str, body: str, sender: str = "shop@example.com") -> None:
    message = (
        f"From: Shop <{sender}>\r\nTo: {to}\r\nSubject: {subject}\r\n"
        f"Content-Type: text/plain; charset=utf-8\r\n\r\n{body}\r\n"
    )
    with smtplib.SMTP("127.0.0.1", port) as smtp:
        smtp.sendmail(sender, [to], message.encode())


def deliver(inbox: Inbox, subject: str, body: str) -> Email:
    raw = (
        f"From: Shop <shop@example.com>\r\nTo: {inbox.address}\r\nSubject: {subject}\r\n\r\n"
        f"{body}\r\n"
    ).encode()
    receive_one(raw, to=inbox.address, mail_from="shop@example.com")
    return Email.objects.filter(inbox=inbox).latest("received_at")


def test_create_inbox_then_mail_arrives_live_and_the_code_is_up_front(page, team: Team, stack):
    login(page, "owner@acme.test")
    page.goto("/inboxes/")
    expect(page.get_by_role("heading", name="No inboxes yet")).to_be_visible()
    expect(page.locator("pre.api-hint")).to_contain_text("/api/v1/inboxes")
    page.get_by_role("link", name="Create your first inbox").click()
    page.get_by_label("Local part").fill("signup")
    page.get_by_label("Agent").fill("checkout-bot")
    page.get_by_label("Tags").fill("ci, smoke")
    page.get_by_label("Lifetime", exact=True).select_option(label="1 day")
    page.get_by_role("button", name="Create inbox").click()
    expect(page.get_by_role("heading", name="signup@pigeonhole.test")).to_be_visible()
    expect(page.get_by_role("status")).to_have_text("Created signup@pigeonhole.test.")
    inbox = Inbox.objects.get(address="signup@pigeonhole.test")
    assert inbox.workspace == team.workspace and inbox.agent_name == "checkout-bot"
    assert inbox.tags == ["ci", "smoke"] and inbox.source == "dashboard"
    assert timedelta(hours=23) < inbox.expires_at - timezone.now() <= timedelta(days=1)
    expect(page.get_by_text("No mail yet.")).to_be_visible()

    # The page listens to the inbox's stream; mail sent over SMTP appears without a reload.
    emails = page.locator("#emails")
    expect(emails).to_have_attribute("data-stream-state", "open")
    page.evaluate("() => { window.__same_page = true; }")
    send(stack.smtp_port, inbox.address, "Your code is 482913", "Your verification code: 482913")
    row = page.locator("tr[data-email]")
    expect(row).to_have_count(1)
    expect(row).to_contain_text("Your code is 482913")
    expect(row).to_have_class("unread")
    expect(row.locator("[data-code]")).to_have_text("482913")
    assert page.evaluate("() => window.__same_page") is True  # no reload happened
    send(stack.smtp_port, inbox.address, "Welcome aboard", "Hello there.")
    expect(page.locator("tr[data-email]")).to_have_count(2)
    expect(page.locator("tr[data-email]").first).to_contain_text("Welcome aboard")  # newest first
    assert page.evaluate("() => window.__same_page") is True
    screenshot(page, "inbox-view")
    page.set_viewport_size({"width": 375, "height": 812})
    assert horizontal_overflow(page) <= 0
    page.set_viewport_size({"width": 1280, "height": 800})

    page.get_by_role("link", name="Your code is 482913").click()
    expect(page.get_by_role("heading", name="Your code is 482913")).to_be_visible()
    expect(page.locator("[data-extracted-code]")).to_have_text("482913")
    copy = page.get_by_role("button", name="Copy code 482913")
    expect(copy).to_have_attribute("data-copy", "482913")
    copy.click()
    expect(copy).to_have_text(re.compile("Copied|Press Ctrl\\+C to copy"))
    email = Email.objects.get(subject="Your code is 482913")
    assert email.read is True  # opening marks it read
    screenshot(page, "email-view")
    page.set_viewport_size({"width": 375, "height": 812})
    assert horizontal_overflow(page) <= 0


def test_mark_read_unread_and_delete_from_the_inbox_view(page, team: Team) -> None:
    inbox = inbox_services.inbox_create(workspace=team.workspace, local_part="flags")
    email = deliver(inbox, "Flag me", "nothing to see")
    login(page, "member@acme.test")
    page.goto(f"/inboxes/{inbox.pk}/")
    row = page.locator(f'tr[data-email="{email.pk}"]')
    expect(row).to_have_class("unread")
    row.get_by_role("button", name="Mark read").click()
    expect(page.get_by_role("status")).to_have_text("Marked “Flag me” read.")
    expect(page.locator(f'tr[data-email="{email.pk}"]')).not_to_have_class("unread")
    assert Email.objects.get(pk=email.pk).read is True
    page.locator(f'tr[data-email="{email.pk}"]').get_by_role("button", name="Mark unread").click()
    expect(page.locator(f'tr[data-email="{email.pk}"]')).to_have_class("unread")
    assert Email.objects.get(pk=email.pk).read is False
    page.once("dialog", lambda dialog: dialog.accept())
    page.locator(f'tr[data-email="{email.pk}"]').get_by_role("button", name="Delete").click()
    expect(page.get_by_role("status")).to_have_text("Deleted “Flag me”.")
    expect(page.locator("tr[data-email]")).to_have_count(0)
    assert not Email.objects.filter(pk=email.pk).exists()
    assert Inbox.objects.get(pk=inbox.pk).email_count == 0


def test_add_and_remove_a_manual_label(page, team: Team) -> None:
    label_services.label_create(
        workspace=team.workspace, key="billing", name="Billing", by=Actor.system("tests")
    )
    label_services.label_create(
        workspace=team.workspace, key="urgent", name="Urgent", by=Actor.system("tests")
    )
    inbox = inbox_services.inbox_create(workspace=team.workspace, local_part="labels")
    email = deliver(inbox, "Invoice 42", "Please pay.")
    login(page, "member@acme.test")
    page.goto(f"/emails/{email.pk}/")
    expect(page.get_by_label("Labels")).to_contain_text("No labels.")
    page.get_by_label("Add a label").select_option("billing")
    page.get_by_role("button", name="Add label").click()
    expect(page.get_by_role("status")).to_have_text("Added the label billing.")
    expect(page.locator('li[data-label="billing"]')).to_contain_text("Billing")
    expect(page.locator('li[data-label="billing"]')).to_contain_text("manual")
    assert list(EmailLabel.objects.filter(email=email).values_list("key", "source")) == [
        ("billing", "manual")
    ]
    page.get_by_label("Add a label").select_option("urgent")
    page.get_by_role("button", name="Add label").click()
    expect(page.locator("li[data-label]")).to_have_count(2)
    page.get_by_role("button", name="Remove label Billing").click()
    expect(page.get_by_role("status")).to_have_text("Removed the label billing.")
    expect(page.locator("li[data-label]")).to_have_count(1)
    assert list(EmailLabel.objects.filter(email=email).values_list("key", flat=True)) == ["urgent"]
    # The inbox list shows the label on the row.
    page.goto(f"/inboxes/{inbox.pk}/")
    expect(page.locator(f'tr[data-email="{email.pk}"]')).to_contain_text("urgent")


def test_search_and_filter_the_inbox_list(page, team: Team) -> None:
    ws = team.workspace
    inbox_services.inbox_create(workspace=ws, local_part="alpha", agent_name="crawler")
    inbox_services.inbox_create(workspace=ws, local_part="beta", tags=["nightly", "eu"])
    old = inbox_services.inbox_create(workspace=ws, local_part="gamma", ttl_minutes=5)
    Inbox.objects.filter(pk=old.pk).update(expires_at=timezone.now() - timedelta(minutes=1))
    login(page, "owner@acme.test")
    page.goto("/inboxes/")
    rows = page.locator("tr[data-inbox]")
    expect(rows).to_have_count(2)  # expired ones are left out by default
    page.get_by_label("Search inboxes").fill("crawler")  # agent
    page.get_by_role("button", name="Search").click()
    expect(rows).to_have_count(1)
    expect(rows.first).to_have_attribute("data-inbox", "alpha@pigeonhole.test")
    page.get_by_label("Search inboxes").fill("nightly")  # tag
    page.get_by_role("button", name="Search").click()
    expect(rows).to_have_count(1)
    expect(rows.first).to_have_attribute("data-inbox", "beta@pigeonhole.test")
    page.get_by_label("Search inboxes").fill("")
    page.get_by_label("Status").select_option("expired")
    page.get_by_role("button", name="Search").click()
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("expired")
    page.get_by_label("Search inboxes").fill("nothing-like-this")
    page.get_by_role("button", name="Search").click()
    expect(page.get_by_role("heading", name="No inbox matches")).to_be_visible()
    page.goto("/inboxes/?status=all")
    expect(rows).to_have_count(3)
    row = page.locator('tr[data-inbox="alpha@pigeonhole.test"]')
    expect(row.get_by_role("button", name="Copy alpha@pigeonhole.test")).to_have_attribute(
        "data-copy", "alpha@pigeonhole.test"
    )
    countdown = page.locator('tr[data-inbox="gamma@pigeonhole.test"] time[data-countdown]')
    expect(countdown).to_have_text("expired")
    screenshot(page, "inbox-list")
    page.set_viewport_size({"width": 375, "height": 812})
    assert horizontal_overflow(page) <= 0


def test_inbox_list_pages(page, team: Team) -> None:
    for n in range(27):
        inbox_services.inbox_create(workspace=team.workspace, local_part=f"box{n:02d}")
    login(page, "owner@acme.test")
    page.goto("/inboxes/")
    expect(page.locator("tr[data-inbox]")).to_have_count(25)
    page.get_by_role("link", name="Next page").click()
    expect(page.locator("tr[data-inbox]")).to_have_count(2)
    expect(page.locator('tr[data-inbox="box00@pigeonhole.test"]')).to_have_count(1)
    expect(page.get_by_role("link", name="Next page")).to_have_count(0)


def test_create_form_errors_in_plain_words(page, team: Team) -> None:
    inbox_services.inbox_create(workspace=team.workspace, local_part="taken")
    login(page, "owner@acme.test")
    page.goto("/inboxes/new/")
    page.get_by_label("Local part").fill("taken")
    page.get_by_role("button", name="Create inbox").click()
    expect(page.locator(".errorlist")).to_contain_text("taken@pigeonhole.test is already taken")
    page.get_by_label("Local part").fill("bad+plus")
    page.get_by_label("Refuse mail from").fill("not a sender")
    page.get_by_role("button", name="Create inbox").click()
    errors = page.locator(".errorlist")
    expect(errors.first).to_contain_text("Not a valid local part")
    expect(page.locator(".errorlist").nth(1)).to_contain_text("Use an address")
    assert Inbox.objects.filter(workspace=team.workspace).count() == 1


def test_extend_make_permanent_and_delete_an_inbox(page, team: Team) -> None:
    inbox = inbox_services.inbox_create(
        workspace=team.workspace, local_part="short", ttl_minutes=60
    )
    login(page, "owner@acme.test")
    page.goto("/inboxes/")
    page.locator('tr[data-inbox="short@pigeonhole.test"]').get_by_role(
        "link", name="Extend"
    ).click()
    page.get_by_label("Expire in").select_option(label="7 days from now")
    page.get_by_role("button", name="Extend").click()
    expect(page.get_by_role("status")).to_have_text("short@pigeonhole.test now expires in 7 days.")
    inbox.refresh_from_db()
    assert timedelta(days=6, hours=23) < inbox.expires_at - timezone.now() <= timedelta(days=7)
    page.get_by_role("button", name="Make permanent").click()
    expect(page.get_by_role("status")).to_have_text("short@pigeonhole.test is now permanent.")
    inbox.refresh_from_db()
    assert inbox.expires_at is None
    expect(page.get_by_text("This inbox is permanent.")).to_be_visible()

    page.goto("/inboxes/")
    row = page.locator('tr[data-inbox="short@pigeonhole.test"]')
    page.once("dialog", lambda dialog: dialog.dismiss())
    row.get_by_role("button", name="Delete short@pigeonhole.test").click()
    assert Inbox.objects.filter(pk=inbox.pk).exists()
    questions: list[str] = []
    page.once("dialog", lambda dialog: (questions.append(dialog.message), dialog.accept()))
    row.get_by_role("button", name="Delete short@pigeonhole.test").click()
    expect(page.get_by_role("status")).to_have_text(
        "Deleted short@pigeonhole.test and all its mail."
    )
    assert questions == ["Delete short@pigeonhole.test and all its mail? This cannot be undone."]
    assert not Inbox.objects.filter(pk=inbox.pk).exists()


def test_disposable_only_workspace_offers_no_permanent_choice(page, team: Team) -> None:
    team.workspace.allow_permanent_inboxes = False
    team.workspace.save(update_fields=["allow_permanent_inboxes"])
    login(page, "owner@acme.test")
    page.goto("/inboxes/new/")
    options = page.get_by_label("Lifetime", exact=True).locator("option").all_inner_texts()
    assert "Permanent" not in options and options[0] == "1 hour"
    page.get_by_role("button", name="Create inbox").click()
    inbox = Inbox.objects.get(workspace=team.workspace)
    expect(page.get_by_role("heading", name=inbox.address)).to_be_visible()
    assert inbox.expires_at is not None
    assert page.get_by_role("button", name="Make permanent").count() == 0


def test_owner_manages_domains(page, team: Team, dns_server: DnsServer) -> None:
    login(page, "admin@acme.test")
    page.goto("/domains/")
    expect(page.locator('tr[data-domain="pigeonhole.test"]')).to_contain_text("default")
    page.get_by_label("Domain").fill("Mail.Acme.Example")
    page.get_by_label("Catch-all").check()
    page.get_by_role("button", name="Add domain").click()
    expect(page.get_by_role("status")).to_contain_text("Added mail.acme.example.")
    domain = Domain.objects.get(domain="mail.acme.example")
    # Verified by its TXT record (tests/dashboard/test_domains.py shows the whole flow).
    dns_server.publish(domain.record_name, domain.record_value)
    page.get_by_role("button", name="Check the DNS record of mail.acme.example").click()
    expect(page.get_by_role("status")).to_contain_text("mail.acme.example is verified.")
    assert domain.workspace == team.workspace and domain.catch_all is True
    row = page.locator('tr[data-domain="mail.acme.example"]')
    row.get_by_role("button", name="Turn catch-all off").click()
    expect(page.get_by_role("status")).to_have_text("Catch-all is off for mail.acme.example.")
    domain.refresh_from_db()
    assert domain.catch_all is False
    # The new domain is offered when creating an inbox.
    page.goto("/inboxes/new/")
    page.get_by_label("Local part").fill("support")
    page.get_by_label("Domain", exact=True).select_option("mail.acme.example")
    page.get_by_role("button", name="Create inbox").click()
    expect(page.get_by_role("heading", name="support@mail.acme.example")).to_be_visible()
    # In use: removal is refused in plain words.
    page.goto("/domains/")
    page.on("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Remove mail.acme.example").click()
    expect(page.get_by_role("alert")).to_contain_text("delete them first")
    Inbox.objects.filter(domain="mail.acme.example").delete()
    page.get_by_role("button", name="Remove mail.acme.example").click()
    expect(page.get_by_role("status")).to_have_text("Removed mail.acme.example.")
    assert not Domain.objects.filter(domain="mail.acme.example").exists()
    page.get_by_label("Domain").fill("pigeonhole.test")
    page.get_by_role("button", name="Add domain").click()
    expect(page.locator(".errorlist")).to_contain_text("already available")


def test_member_uses_inboxes_but_cannot_manage_domains(page, team: Team) -> None:
    Domain.objects.create(workspace=team.workspace, domain="acme.example")
    login(page, "member@acme.test")
    # Members carry the write scope: they create inboxes.
    page.goto("/inboxes/")
    page.get_by_role("link", name="Create your first inbox").click()
    page.get_by_role("button", name="Create inbox").click()
    expect(page.get_by_role("status")).to_contain_text("Created ")
    # Domains: read only.
    page.goto("/domains/")
    expect(page.locator('tr[data-domain="acme.example"]')).to_be_visible()
    assert page.get_by_role("button", name="Add domain").count() == 0
    assert page.get_by_role("button", name="Remove acme.example").count() == 0
    expect(page.get_by_text("Only owners and admins can add or change domains.")).to_be_visible()
    # A forged removal is refused by the server with the plain-words 403 page.
    page.evaluate(
        """() => {
            const form = document.createElement('form');
            form.method = 'post';
            form.action = '/domains/acme.example/remove/';
            const token = document.cookie.match(/csrftoken=([^;]+)/)[1];
            form.innerHTML = `<input type="hidden" name="csrfmiddlewaretoken" value="${token}">`;
            document.body.appendChild(form);
            form.submit();
        }"""
    )
    page.get_by_role("heading", name="You can't do that here").wait_for()
    expect(page.locator("[data-forbidden]")).to_contain_text("may not manage domains")
    allow_console_error(page, "403")
    assert Domain.objects.filter(domain="acme.example").exists()


def test_other_workspaces_inboxes_and_emails_are_not_found(page, team: Team) -> None:
    from apikeys import services as key_services

    other = key_services.workspace_get_or_create(name="Other")
    foreign = inbox_services.inbox_create(workspace=other, local_part="secret")
    email = deliver(foreign, "Private", "not for Acme")
    login(page, "owner@acme.test")
    for path in (
        f"/inboxes/{foreign.pk}/",
        f"/emails/{email.pk}/",
        f"/emails/{email.pk}/html",
        f"/emails/{email.pk}/raw",
    ):
        response = page.goto(path)
        assert response.status == 404, path
    allow_console_error(page, "404")
    response = page.request.post(f"/inboxes/{foreign.pk}/delete/")
    assert response.status in (403, 404)
    assert Inbox.objects.filter(pk=foreign.pk).exists()


def test_raw_source_and_attachment_downloads_are_safe(page, team: Team) -> None:
    inbox = inbox_services.inbox_create(workspace=team.workspace, local_part="files")
    boundary = "XYZ"
    raw = (
        f"From: a@example.com\r\nTo: {inbox.address}\r\nSubject: Files\r\nMIME-Version: 1.0\r\n"
        f'Content-Type: multipart/mixed; boundary="{boundary}"\r\n\r\n'
        f"--{boundary}\r\nContent-Type: text/plain\r\n\r\nSee attached.\r\n"
        f"--{boundary}\r\nContent-Type: text/html; name=evil.html\r\n"
        "Content-Disposition: attachment; filename=evil.html\r\n\r\n"
        "<script>alert(1)</script>\r\n"
        f"--{boundary}--\r\n"
    ).encode()
    receive_one(raw, to=inbox.address, mail_from="a@example.com")
    email = Email.objects.get(inbox=inbox)
    login(page, "owner@acme.test")
    page.goto(f"/emails/{email.pk}/")
    page.get_by_role("tab", name="Raw source").click()
    expect(page.locator("#part-raw pre")).to_contain_text("Subject: Files")
    page.get_by_role("tab", name=re.compile("Attachments")).click()
    expect(page.get_by_role("link", name="evil.html")).to_be_visible()
    raw_response = page.request.get(f"/emails/{email.pk}/raw")
    assert raw_response.headers["content-type"].startswith("text/plain")
    assert raw_response.headers["x-content-type-options"] == "nosniff"
    assert raw_response.headers["content-disposition"].startswith("inline")
    assert raw_response.body() == bytes(email.raw.content)
    attachment = email.attachments.get()
    download = page.request.get(f"/emails/{email.pk}/attachments/{attachment.pk}")
    assert download.headers["content-type"] == "application/octet-stream"
    assert download.headers["content-disposition"].startswith("attachment")
    assert "evil.html" in download.headers["content-disposition"]
    assert "sandbox" in download.headers["content-security-policy"]


def test_forwarding_set_in_the_dashboard_remembers_the_member(page, team: Team) -> None:
    """The member who sets forward_to in the create form is its setter: a forwarded copy follows
    their approval rule (and waits once they have left the workspace)."""
    login(page, "member@acme.test")
    page.goto("/inboxes/new/")
    page.get_by_label("Local part").fill("forwards")
    page.get_by_label("Forward a copy to").fill("me@elsewhere.example")
    expect(page.get_by_text("goes out from this inbox's address")).to_be_visible()
    page.get_by_role("button", name="Create inbox").click()
    expect(page.get_by_role("heading", name="forwards@pigeonhole.test")).to_be_visible()
    inbox = Inbox.objects.get(address="forwards@pigeonhole.test")
    assert inbox.forward_to == "me@elsewhere.example"
    assert (inbox.forward_set_via, inbox.forward_set_by_user_id) == ("session", team.member.pk)
    assert inbox.forward_set_by_key_id is None and inbox.forward_requires_approval is False

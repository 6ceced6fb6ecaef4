"""Approvals in a real browser on the live stack: the queue of pending outgoing mail, one item,
decisions through ``POST /api/v1/outbox/{id}/decision`` with the session, the history, the nav
badge, members read-only, the no-JavaScript fallback and live state changes.

Mail is sent through the real API with a key that requires approval, to another inbox of the
workspace, so an approved message arrives through the receive pipeline and is read back through
the API exactly as the recipient would see it.
"""

from __future__ import annotations

import email
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from email import policy
from email.message import EmailMessage
from typing import Any

import httpx
import pytest
from aiosmtpd.controller import Controller
from django.utils import timezone
from playwright.sync_api import expect

from apikeys import services as key_services
from apikeys.audit import Actor
from apikeys.models import Role
from inboxes import services as inbox_services
from inboxes.models import Inbox
from mail.models import Email
from outbox import mime
from outbox import services as outbox_services
from outbox.models import Kind, OutboxItem, Status
from tests.dashboard.conftest import (
    PASSWORD,
    Team,
    add_person,
    allow_console_error,
    horizontal_overflow,
    login,
    screenshot,
)
from tests.live import Stack, free_port
from tests.outbox.conftest import Sink

DECISION = re.compile(r"/api/v1/outbox/out_[0-9a-z]+/decision$")


@dataclass
class Outbox:
    """An agent inbox, a recipient inbox on the same hosted domain and an approval key."""

    team: Team
    sender: Inbox
    recipient: Inbox
    key_name: str
    key_prefix: str
    api: httpx.Client
    since: str

    def send(self, subject: str, text: str, reason: str = "", **extra: Any) -> str:
        response = self.api.post(
            f"inboxes/{self.sender.pk}/send",
            json={
                "to": [self.recipient.address],
                "subject": subject,
                "text": text,
                "reason": reason,
                **extra,
            },
        )
        assert response.status_code == 202, response.text
        assert response.json()["status"] == "pending"
        return response.json()["id"]

    def received(self, subject: str) -> dict[str, Any]:
        """The recipient's copy, read through the API (waits for it to arrive)."""
        response = self.api.get(
            f"inboxes/{self.recipient.pk}/wait",
            params={"timeout": 30, "since": self.since, "subject": f"^{re.escape(subject)}$"},
        )
        assert response.status_code == 200, response.text
        return response.json()


@pytest.fixture
def outbox(team: Team, stack: Stack) -> Iterator[Outbox]:
    since = timezone.now().isoformat()
    sender = inbox_services.inbox_create(
        workspace=team.workspace, local_part="signup-agent", name="Signup Agent"
    )
    recipient = inbox_services.inbox_create(workspace=team.workspace, local_part="customer")
    created = key_services.api_key_create(
        workspace=team.workspace,
        name="Signup bot",
        scopes=("read", "write", "send"),
        require_approval=True,
        by=Actor.system("tests"),
    )
    with stack.client(created.plain) as api:
        yield Outbox(team, sender, recipient, "Signup bot", created.key.prefix, api, since)


def badge(page: Any) -> Any:
    return page.get_by_role("navigation", name="Main").get_by_role(
        "link", name=re.compile("^Approvals")
    )


# --- the queue ----------------------------------------------------------------------------------


def test_queue_lists_pending_mail_oldest_first(page, outbox: Outbox) -> None:
    first = outbox.send(
        "Welcome to Acme", "Hi!\nYour account is ready.", reason="Confirms the sign-up of bob"
    )
    second = outbox.send("Your receipt", "Thanks for your order.", cc=["billing@example.com"])
    login(page, "member@acme.test")
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Approvals").click()
    page.get_by_role("heading", name="Approvals", level=1).wait_for()
    cards = page.locator("li[data-item]")
    expect(cards).to_have_count(2)
    assert [cards.nth(0).get_attribute("data-item"), cards.nth(1).get_attribute("data-item")] == [
        first,
        second,
    ]
    card = page.locator(f'li[data-item="{first}"]')
    expect(card.get_by_role("heading", name="Welcome to Acme")).to_be_visible()
    expect(card.locator("[data-reason]")).to_have_text("Confirms the sign-up of bob")
    expect(card.locator("[data-recipients]")).to_have_text(outbox.recipient.address)
    expect(card).to_contain_text(outbox.sender.address)
    expect(card.locator("[data-key]")).to_have_text(f"Signup bot {outbox.key_prefix}…")
    # 72 hours from now, counted down by app.js.
    expect(card.locator("time[data-countdown]")).to_have_text("expires in 3 days")
    other = page.locator(f'li[data-item="{second}"]')
    expect(other).to_contain_text("The agent gave no reason.")
    expect(other.locator("[data-recipients]")).to_have_text(
        f"{outbox.recipient.address} cc billing@example.com"
    )
    expect(badge(page)).to_have_text("Approvals 2 pending")
    expect(page.get_by_text("Only owners and admins can approve or reject")).to_be_visible()
    screenshot(page, "approvals-queue")
    page.set_viewport_size({"width": 375, "height": 812})
    assert horizontal_overflow(page) <= 0
    page.set_viewport_size({"width": 1280, "height": 800})
    card.get_by_role("link", name="Read the message: Welcome to Acme").click()
    page.get_by_role("heading", name="Welcome to Acme", level=1).wait_for()
    assert page.url.endswith(f"/approvals/{first}/")


def test_empty_queue_and_history_say_so_in_plain_words(page, team: Team) -> None:
    login(page, "owner@acme.test")
    page.goto("/approvals/")
    expect(page.locator("[data-empty]")).to_contain_text("Nothing is waiting for approval")
    expect(badge(page)).to_have_text("Approvals")
    page.get_by_role("link", name="See earlier decisions").click()
    expect(page.locator("[data-empty]")).to_contain_text("No decisions yet")
    page.set_viewport_size({"width": 375, "height": 812})
    assert horizontal_overflow(page) <= 0


# --- deciding -----------------------------------------------------------------------------------


def test_admin_approves_with_edits_and_the_recipient_gets_the_edited_version(
    page, outbox: Outbox
) -> None:
    item_id = outbox.send(
        "Welcom to Acme",
        "Hi Bob,\nyour code is 4821.\n",
        reason="Bob signed up at 10:02",
        html="<p onclick=\"alert('x')\">Hi <b>Bob</b></p><script>alert(1)</script>",
    )
    outbox.send("Another one", "Stays pending.")
    login(page, "admin@acme.test")
    expect(badge(page)).to_have_text("Approvals 2 pending")
    page.goto(f"/approvals/{item_id}/")
    expect(page.get_by_role("heading", level=1)).to_have_text("Welcom to Acme")
    expect(page.locator("[data-reason]")).to_have_text("Bob signed up at 10:02")
    expect(page.locator("[data-to]")).to_have_text(outbox.recipient.address)
    expect(page.locator("[data-text]")).to_have_text("Hi Bob,\nyour code is 4821.\n")
    # The HTML part is shown sanitised in a sandboxed frame, and as escaped source.
    page.get_by_text("HTML source").click()
    expect(page.locator("[data-html]")).to_have_text(
        "<p onclick=\"alert('x')\">Hi <b>Bob</b></p><script>alert(1)</script>"
    )
    assert page.locator("main b").count() == 0
    shown = page.frame_locator("iframe[data-part-html]").locator("body")
    expect(shown).to_have_text("Hi Bob")
    assert shown.inner_html().strip() == "<p>Hi <b>Bob</b></p>"
    expect(page.locator("[data-state]")).to_contain_text("Waiting for a decision")
    screenshot(page, "approvals-item")

    approve = page.locator('form[data-decision="approve"]')
    expect(approve.get_by_label("Subject")).to_have_value("Welcom to Acme")
    approve.get_by_label("Subject").fill("Welcome to Acme")
    approve.get_by_label("Text").fill("Hi Bob,\nyour code is 4821.\nSee you soon!")
    approve.get_by_label("Note (optional)").fill("Fixed the typo")
    with page.expect_response(DECISION) as answer:
        approve.get_by_role("button", name="Approve and send").click()
    response = answer.value
    assert response.request.method == "POST" and response.status == 200
    assert response.request.headers["x-csrftoken"]
    assert response.request.post_data_json == {
        "decision": "approve",
        "note": "Fixed the typo",
        "subject": "Welcome to Acme",
        "text": "Hi Bob,\nyour code is 4821.\nSee you soon!",
    }
    expect(page.locator("[data-state]")).to_contain_text("Approved by admin@acme.test")
    assert page.url.endswith(f"/approvals/{item_id}/")
    expect(page.get_by_role("heading", level=1)).to_have_text("Welcome to Acme")
    expect(page.locator("[data-note]")).to_have_text("Fixed the typo")
    expect(page.get_by_role("button", name="Approve and send")).to_have_count(0)
    expect(badge(page)).to_have_text("Approvals 1 pending")

    item = OutboxItem.objects.select_related("decided_by").get(pk=item_id)
    assert item.status == Status.SENT and item.decided_by.get_username() == "admin@acme.test"
    assert item.decision_note == "Fixed the typo"
    delivered = outbox.received("Welcome to Acme")
    assert delivered["subject"] == "Welcome to Acme"
    assert delivered["text"].replace("\r\n", "\n").rstrip("\n") == (
        "Hi Bob,\nyour code is 4821.\nSee you soon!"
    )
    assert delivered["from"]["address"] == outbox.sender.address
    # The edited text replaced the HTML part (the page said so before the click).
    assert delivered["html"].strip() == ("<p>Hi Bob,<br>your code is 4821.<br>See you soon!</p>")
    assert not Email.objects.filter(inbox=outbox.recipient, subject="Welcom to Acme").exists()


def test_untouched_fields_are_not_sent_as_edits(page, outbox: Outbox) -> None:
    item_id = outbox.send("Exactly this", "Line one\r\nLine two\r\n")
    login(page, "owner@acme.test")
    page.goto(f"/approvals/{item_id}/")
    with page.expect_response(DECISION) as answer:
        page.get_by_role("button", name="Approve and send").click()
    assert answer.value.request.post_data_json == {"decision": "approve"}
    expect(page.locator("[data-state]")).to_contain_text("Approved by owner@acme.test")
    assert OutboxItem.objects.get(pk=item_id).text == "Line one\r\nLine two\r\n"
    assert outbox.received("Exactly this")["subject"] == "Exactly this"


def test_owner_rejects_with_a_note_by_keyboard_and_nothing_is_delivered(
    page, outbox: Outbox
) -> None:
    item_id = outbox.send("Spammy offer", "Buy now!", reason="Marketing push")
    login(page, "owner@acme.test")
    expect(badge(page)).to_have_text("Approvals 1 pending")
    page.goto(f"/approvals/{item_id}/")
    reject = page.locator('form[data-decision="reject"]')
    reject.get_by_label("Why not? (optional)").focus()
    page.keyboard.type("Not a message we send to customers")
    page.keyboard.press("Tab")
    focused = page.evaluate("() => document.activeElement.textContent.trim()")
    assert focused == "Reject"
    with page.expect_response(DECISION) as answer:
        page.keyboard.press("Enter")
    assert answer.value.status == 200
    assert answer.value.request.post_data_json == {
        "decision": "reject",
        "note": "Not a message we send to customers",
    }
    expect(page.locator("[data-state]")).to_contain_text("Rejected by owner@acme.test")
    expect(page.locator("[data-state]")).to_contain_text("Nothing was sent.")
    expect(badge(page)).to_have_text("Approvals")
    item = OutboxItem.objects.get(pk=item_id)
    assert item.status == Status.REJECTED and item.decision_note == (
        "Not a message we send to customers"
    )

    page.get_by_role("link", name="History").first.click()
    row = page.locator(f'tr[data-item="{item_id}"]')
    expect(row).to_contain_text("rejected")
    expect(row.locator("[data-decided-by]")).to_have_text("owner@acme.test")
    expect(row.locator("[data-note]")).to_have_text("Not a message we send to customers")
    screenshot(page, "approvals-history")
    page.set_viewport_size({"width": 375, "height": 812})
    assert horizontal_overflow(page) <= 0
    # Nothing reached the recipient, and the queue is empty again.
    assert Email.objects.filter(inbox=outbox.recipient).count() == 0
    waited = outbox.api.get(f"inboxes/{outbox.recipient.pk}/wait", params={"timeout": 0})
    assert waited.status_code == 204
    page.goto("/approvals/")
    expect(page.locator("[data-empty]")).to_be_visible()


def test_member_reads_but_cannot_decide_and_the_api_refuses(page, outbox: Outbox) -> None:
    item_id = outbox.send("Hold on", "Pending text", reason="Needs a human")
    login(page, "member@acme.test")
    page.goto(f"/approvals/{item_id}/")
    expect(page.locator("[data-text]")).to_have_text("Pending text")
    expect(page.locator("[data-read-only]")).to_contain_text(
        "Only owners and admins can approve or reject outgoing mail. Your role in Acme is member"
    )
    assert page.get_by_role("button", name="Approve and send").count() == 0
    assert page.get_by_role("button", name="Reject").count() == 0
    assert page.locator("form[data-decision]").count() == 0
    # Forced through the session anyway: the API answers 403 forbidden.
    result = page.evaluate(
        """async (id) => {
            const token = document.cookie.split("; ").find(c => c.startsWith("csrftoken="))
                .split("=")[1];
            const response = await fetch(`/api/v1/outbox/${id}/decision`, {
                method: "POST", credentials: "same-origin",
                headers: {"Content-Type": "application/json", "X-CSRFToken": token},
                body: JSON.stringify({decision: "approve"}),
            });
            return {status: response.status, body: await response.json()};
        }""",
        item_id,
    )
    assert result["status"] == 403
    assert result["body"]["error"]["code"] == "forbidden"
    allow_console_error(page, "403")
    # And the dashboard's no-JavaScript path refuses too.
    token = page.evaluate("() => document.querySelector('input[name=csrfmiddlewaretoken]').value")
    forced = page.request.post(
        f"/approvals/{item_id}/decide/",
        form={"csrfmiddlewaretoken": token, "decision": "approve"},
        headers={"Referer": page.url},
    )
    assert forced.status == 403
    assert "Only admins and owners of Acme can do this." in forced.text()
    assert OutboxItem.objects.get(pk=item_id).status == Status.PENDING
    expect(badge(page)).to_have_text("Approvals 1 pending")


def test_someone_elses_decision_shows_up_live_and_a_late_click_gets_plain_words(
    page, outbox: Outbox
) -> None:
    item_id = outbox.send("Race", "Who decides first?")
    login(page, "admin@acme.test")
    page.goto(f"/approvals/{item_id}/")
    expect(page.get_by_role("button", name="Approve and send")).to_be_enabled()
    # The owner decides elsewhere; the open page hears it through the item's wait.
    outbox_services.decide(
        item=OutboxItem.objects.get(pk=item_id),
        user=outbox.team.owner,
        role=Role.OWNER,
        decision="reject",
        note="Not now",
        by=Actor.system("tests"),
    )
    expect(page.locator("[data-changed]")).to_have_text(
        "This message was just rejected by owner@acme.test. Show its current state"
    )
    expect(page.get_by_role("button", name="Approve and send")).to_be_disabled()
    # A click that got through anyway (re-enabled here) meets the API's 409 in plain words.
    page.locator("#decision button").evaluate_all("(all) => all.forEach(b => b.disabled = false)")
    with page.expect_response(DECISION) as answer:
        page.get_by_role("button", name="Approve and send").click()
    assert answer.value.status == 409
    alert = page.locator("#decision-error")
    expect(alert).to_have_text(
        "The item is rejected, not pending. Someone else may have decided it, or it expired."
        " Show its current state"
    )
    expect(alert).to_be_focused()
    allow_console_error(page, "409")
    alert.get_by_role("link", name="Show its current state").click()
    expect(page.locator("[data-state]")).to_contain_text("Rejected by owner@acme.test")
    assert OutboxItem.objects.get(pk=item_id).status == Status.REJECTED


def test_without_javascript_the_forms_post_to_the_dashboard(
    browser, stack: Stack, outbox: Outbox
) -> None:
    context = browser.new_context(base_url=stack.base_url, java_script_enabled=False)
    try:
        page = context.new_page()
        item_id = outbox.send("No script", "Plain body")
        login(page, "admin@acme.test")
        page.goto(f"/approvals/{item_id}/")
        approve = page.locator('form[data-decision="approve"]')
        approve.get_by_label("Subject").fill("No script, edited")
        approve.get_by_role("button", name="Approve and send").click()
        expect(page.get_by_role("status").first).to_have_text(
            f"Approved and handed to delivery for {outbox.recipient.address}."
        )
        assert page.url.endswith(f"/approvals/{item_id}/")
        item = OutboxItem.objects.get(pk=item_id)
        assert item.status == Status.SENT and item.subject == "No script, edited"
        assert item.text == "Plain body"  # untouched text is not an edit
        assert outbox.received("No script, edited")["text"].rstrip("\r\n") == "Plain body"
    finally:
        context.close()


def test_history_filters_and_pages(page, outbox: Outbox) -> None:
    owner = outbox.team.owner
    ids = [outbox.send(f"Item {n:02d}", "x") for n in range(27)]
    for n, item_id in enumerate(ids):
        outbox_services.decide(
            item=OutboxItem.objects.get(pk=item_id),
            user=owner,
            role=Role.OWNER,
            decision="approve" if n == 0 else "reject",
            note=f"note {n:02d}",
            by=Actor.system("tests"),
        )
    # One nobody decided: sent 73 hours ago, expired by the sweeper.
    stale = outbox.send("Too late", "x")
    OutboxItem.objects.filter(pk=stale).update(created_at=timezone.now() - timedelta(hours=73))
    assert outbox_services.expire_pending() == 1
    login(page, "admin@acme.test")
    page.goto("/approvals/history/")
    rows = page.locator("tr[data-item]")
    expect(rows).to_have_count(25)
    expect(rows.first).to_contain_text("Item 26")  # the most recent decision first
    expect(page.get_by_text("Page 1 of 2")).to_be_visible()
    page.get_by_role("link", name="Older").click()
    expect(rows).to_have_count(3)
    expect(rows.nth(0)).to_contain_text("Item 01")
    expect(rows.nth(1)).to_contain_text("Item 00")
    expect(rows.nth(1)).to_contain_text("approved, handed over")
    expect(rows.nth(1).locator("[data-delivery]")).to_have_text("delivered here")
    expect(rows.nth(2)).to_contain_text("Too late")  # expired an hour ago
    page.get_by_label("Show").select_option(label="Approved (handed to delivery)")
    page.get_by_role("button", name="Filter").click()
    expect(rows).to_have_count(1)
    expect(rows.first.locator("[data-note]")).to_have_text("note 00")
    page.get_by_label("Show").select_option(label="Expired undecided")
    page.get_by_role("button", name="Filter").click()
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("Too late")
    expect(rows.first.locator("[data-decided-by]")).to_have_text("nobody (expired)")
    rows.first.get_by_role("link", name="Too late").click()
    expect(page.locator("[data-state]")).to_have_text(
        "Nobody decided in time, so it expired and was never sent."
    )
    page.goto("/approvals/history/?status=failed")
    expect(page.locator("[data-empty]")).to_contain_text("No decisions of this kind yet")


def test_another_workspaces_item_is_not_found(page, outbox: Outbox) -> None:
    item_id = outbox.send("Private", "Acme only")
    other = key_services.workspace_get_or_create(name="Beta Labs")
    add_person(other, "beta@beta.test", Role.OWNER, PASSWORD)
    login(page, "beta@beta.test")
    response = page.goto(f"/approvals/{item_id}/")
    assert response.status == 404
    expect(page.locator("[data-not-found]")).to_contain_text("No such outgoing message")
    allow_console_error(page, "404")
    page.goto("/approvals/")
    expect(page.locator("[data-empty]")).to_be_visible()
    assert "Private" not in page.locator("main").inner_text()


# --- what is approved is what goes out (a real relay on 127.0.0.1) -----------------------------


@pytest.fixture(scope="module")
def relay() -> Iterator[Sink]:
    """The SMTP relay of this module's stack: mail for other domains lands here."""
    state = Sink(port=free_port())
    controller = Controller(state, hostname="127.0.0.1", port=state.port)
    controller.start()
    yield state
    controller.stop()


@pytest.fixture(scope="module")
def stack(django_db_setup: None, django_db_blocker: Any, relay: Sink) -> Iterator[Stack]:
    """The live stack of this module, relaying mail for other domains to ``relay``."""
    from django.db import connection

    running = Stack(connection.settings_dict["NAME"])
    for process in {id(running.web): running.web, id(running.smtp): running.smtp}.values():
        process.env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)  # see tests/dashboard/conftest.py
        for name in ("EMAIL_BACKEND", "OUTBOX_CAPTURE"):
            process.env.pop(name, None)
        process.env["EMAIL_URL"] = f"smtp://127.0.0.1:{relay.port}"
    running.start()
    yield running
    running.stop()


def relayed(relay: Sink, subject: str) -> tuple[list[str], EmailMessage]:
    """The envelope recipients and the parsed bytes of the message the relay got."""
    deadline = time.monotonic() + 30
    while True:
        for _, rcpts, raw in list(relay.received):
            message = email.message_from_bytes(raw, policy=policy.default)
            if message["Subject"] == subject:
                assert isinstance(message, EmailMessage)
                return rcpts, message
        assert time.monotonic() < deadline, f"the relay never got {subject!r}"
        time.sleep(0.1)


def content(part: EmailMessage | None) -> str:
    """A text part as its reader gets it (SMTP carries CRLF line ends)."""
    assert part is not None
    return part.get_content().replace("\r\n", "\n")


def shown(page: Any) -> dict[str, Any]:
    """What the approval page shows will go out."""
    if not page.locator("iframe[data-part-html]").count():
        page.locator("[data-part-html-none]").wait_for()
        html = {"html_source": None, "html_shown": None}
    else:
        html = {
            "html_source": page.locator("[data-html]").text_content(),
            "html_shown": page.frame_locator("iframe[data-part-html]")
            .locator("body")
            .inner_html()
            .strip(),
        }
    return html | {
        "to": page.locator("[data-part-to]").inner_text(),
        "cc": page.locator("[data-part-cc]").inner_text(),
        "bcc": page.locator("[data-part-bcc]").inner_text(),
        "envelope": page.locator("[data-envelope]").inner_text().split(", "),
        "attachments": page.locator("[data-attachments]").inner_text(),
        "text": page.locator("[data-part-text]").inner_text(),
    }


def test_an_edited_text_replaces_the_html_part_and_the_page_shows_it_before_the_click(
    page, outbox: Outbox, relay: Sink
) -> None:
    item_id = outbox.send(
        "Your order",
        "Hi, please cancel my order.",
        to=["shop@example.com"],
        cc=["orders@example.org"],
        html="<b>please cancel</b> my order",
    )
    login(page, "owner@acme.test")
    page.goto(f"/approvals/{item_id}/")
    before = shown(page)
    assert before["html_shown"] == "<b>please cancel</b> my order"
    assert (before["to"], before["cc"], before["bcc"]) == (
        "shop@example.com",
        "orders@example.org",
        "—",
    )
    assert before["attachments"] == "none"
    # Before any click, the page says what an edit of the text does to the HTML part.
    expect(page.locator("[data-html-edit-notice]")).to_contain_text(
        "If you edit the text, the HTML part is replaced by your text rendered as HTML"
    )
    expect(page.locator("[data-html-replaced]")).to_be_hidden()
    edited = "Hi, please keep my order.\n\nThanks & regards <Bob>"
    page.locator('form[data-decision="approve"]').get_by_label("Text").fill(edited)
    expect(page.locator("[data-html-replaced]")).to_be_visible()
    frame = page.frame_locator("iframe[data-part-html]").locator("body")
    expect(frame).to_contain_text("Thanks & regards <Bob>")
    preview = frame.inner_html().strip()
    expect(page.locator("[data-part-text]")).to_have_text(edited)  # the text part that goes out
    assert preview == "<p>Hi, please keep my order.</p>\n\n<p>Thanks &amp; regards &lt;Bob&gt;</p>"
    screenshot(page, "approvals-edit-replaces-html")
    with page.expect_response(DECISION) as answer:
        page.get_by_role("button", name="Approve and send").click()
    assert answer.value.status == 200
    assert OutboxItem.objects.get(pk=item_id).html == preview

    rcpts, message = relayed(relay, "Your order")
    assert sorted(rcpts) == sorted(before["envelope"])
    assert (message["To"], message["Cc"], message["Bcc"]) == (before["to"], before["cc"], None)
    assert content(message.get_body(("plain",))).rstrip("\n") == edited
    assert content(message.get_body(("html",))).rstrip("\n") == preview
    assert b"please cancel" not in relay.received[-1][2]
    assert list(message.iter_attachments()) == []
    # The page of the decided item shows what went out, and that the relay took it.
    expect(page.locator("[data-state]")).to_contain_text("Approved by owner@acme.test")
    after = shown(page)
    assert after["text"].rstrip("\n") == edited and after["html_shown"] == preview
    expect(page.locator("[data-delivery-section] [data-delivery]")).to_have_text("delivered")
    expect(page.locator("[data-delivery-section] [data-reply]")).to_have_text("250 OK")


def test_an_unedited_approval_sends_byte_for_byte_what_the_page_showed(
    page, outbox: Outbox, relay: Sink
) -> None:
    html = '<p style="color:red">Hi <i>Ann</i></p><script>alert(1)</script><img src="https://t.example/x.gif">'
    item_id = outbox.send(
        "As written", "Hi Ann,\nsee you.\n", to=["ann@example.com", "al@example.net"], html=html
    )
    login(page, "admin@acme.test")
    page.goto(f"/approvals/{item_id}/")
    before = shown(page)
    # Shown safely (no script, no remote image fetched, no style), the source as it goes out.
    assert "<script" not in before["html_shown"] and "t.example" not in before["html_shown"]
    assert "<i>Ann</i>" in before["html_shown"]
    assert before["html_source"].rstrip("\n") == html
    with page.expect_response(DECISION) as answer:
        page.get_by_role("button", name="Approve and send").click()
    assert answer.value.status == 200
    rcpts, message = relayed(relay, "As written")
    assert sorted(rcpts) == sorted(before["envelope"]) == ["al@example.net", "ann@example.com"]
    assert message["To"] == before["to"] == "ann@example.com, al@example.net"
    assert message["Cc"] is None and before["cc"] == "—"
    assert content(message.get_body(("plain",))) == before["text"] == "Hi Ann,\nsee you.\n"
    assert content(message.get_body(("html",))).rstrip("\n") == html
    assert list(message.iter_attachments()) == [] and before["attachments"] == "none"


def message_has_no_html(raw: bytes) -> bool:
    parsed = email.message_from_bytes(raw, policy=policy.default)
    return isinstance(parsed, EmailMessage) and parsed.get_body(("html",)) is None


def test_a_forwarded_copy_shows_its_attachments_and_goes_out_as_received(
    page, outbox: Outbox, relay: Sink
) -> None:
    original = EmailMessage(policy=policy.SMTP)
    original["From"] = "Vendor <billing@vendor.example>"
    original["To"] = outbox.sender.address
    original["Subject"] = "Invoice 7"
    original.set_content("Invoice attached.\n")
    original.add_attachment(
        b"%PDF-1.4 seven", maintype="application", subtype="pdf", filename="invoice-7.pdf"
    )
    raw, _ = mime.forwarded(
        original.as_bytes(),
        inbox_address=outbox.sender.address,
        sender_address="billing@vendor.example",
        sender_name="Vendor",
    )
    item = OutboxItem.objects.create(
        workspace=outbox.team.workspace,
        inbox=outbox.sender,
        kind=Kind.FORWARD,
        from_address=outbox.sender.address,
        to=["keeper@example.com"],
        status=Status.PENDING,
        approval_required=True,
        reason="forward_to",
        raw=raw,
    )
    login(page, "owner@acme.test")
    page.goto(f"/approvals/{item.pk}/")
    before = shown(page)
    assert before["html_source"] is None and message_has_no_html(raw)
    expect(page.locator("[data-attachment]")).to_have_text(
        "invoice-7.pdf (application/pdf, 14\xa0bytes)"
    )
    expect(page.locator("[data-forward-notice]")).to_contain_text("cannot be edited")
    with page.expect_response(DECISION) as answer:
        page.get_by_role("button", name="Approve and send").click()
    assert answer.value.status == 200
    rcpts, message = relayed(relay, "Invoice 7")
    assert rcpts == before["envelope"] == ["keeper@example.com"]
    assert content(message.get_body(("plain",))) == before["text"] == "Invoice attached.\n"
    (attachment,) = message.iter_attachments()
    assert attachment.get_filename() == "invoice-7.pdf"
    assert attachment.get_content() == b"%PDF-1.4 seven"
    body = raw.split(b"\r\n\r\n", 1)[1]
    assert relay.received[-1][2].endswith(body)  # the forwarded bytes, as received

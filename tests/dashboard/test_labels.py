"""The labels pages in a real browser on the live stack: the list, the editor with its JSON rule
and the inline tester (``POST /api/v1/labels/test`` with the session), errors in plain words, a
real email labelled by the saved rule, and members kept to reading and testing."""

from __future__ import annotations

import json
import smtplib

from playwright.sync_api import expect

from apikeys.audit import Actor
from inboxes import services as inbox_services
from labels import services as label_services
from labels.models import Label
from tests.dashboard.conftest import (
    PHONE,
    Team,
    allow_console_error,
    horizontal_overflow,
    login,
    screenshot,
)
from tests.live import Stack

INVOICE_RULE = {
    "match": "any",
    "conditions": [{"field": "subject", "op": "contains", "value": "invoice"}],
}


def _send(stack: Stack, to: str, subject: str, body: str = "Hello") -> None:
    message = (
        f"From: Billing <billing@shop.example>\r\nTo: {to}\r\nSubject: {subject}\r\n\r\n{body}\r\n"
    )
    with smtplib.SMTP("127.0.0.1", stack.smtp_port) as smtp:
        smtp.sendmail("billing@shop.example", [to], message.encode())


def _test_sample(page, subject: str) -> None:  # type: ignore[no-untyped-def]
    tester = page.locator("#tester")
    tester.get_by_label("Subject").fill(subject)
    tester.get_by_role("button", name="Test").click()


def test_create_label_test_it_inline_then_mail_gets_it(page, team: Team, stack: Stack) -> None:
    inbox = inbox_services.inbox_create(workspace=team.workspace, local_part="billing")
    login(page, "owner@acme.test")
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Labels").click()
    expect(page.locator(".empty")).to_contain_text("No labels yet.")
    page.get_by_role("link", name="New label").click()
    page.get_by_label("Key").fill("invoices")
    page.get_by_label("Name").fill("Invoices")
    page.get_by_label("Rule (JSON)").fill(json.dumps(INVOICE_RULE, indent=2))

    # The tester runs the rule as typed, before anything is saved.
    _test_sample(page, "Your invoice #1001")
    verdict = page.locator("[data-test-result]")
    expect(verdict).to_have_attribute("data-matched", "true")
    expect(verdict).to_contain_text('Matched by rule — subject contains "invoice"')
    _test_sample(page, "Lunch on Friday?")
    expect(verdict).to_have_attribute("data-matched", "false")
    expect(verdict).to_contain_text("Not matched — no condition matched")
    assert not Label.objects.exists()  # testing saved nothing
    screenshot(page, "label-editor")
    page.set_viewport_size(PHONE)
    assert horizontal_overflow(page) <= 0
    page.set_viewport_size({"width": 1280, "height": 800})

    page.get_by_role("button", name="Create label").click()
    expect(page.get_by_role("status")).to_have_text("Label “Invoices” (invoices) created.")
    label = Label.objects.get(workspace=team.workspace, key="invoices")
    assert label.rules["conditions"][0] == {
        "field": "subject",
        "op": "contains",
        "value": "invoice",
        "name": "",
        "negate": False,
    }

    # A real message over SMTP: the saved rule labels it (250 comes after the commit).
    _send(stack, inbox.address, "Invoice 2024-17 for March")
    _send(stack, inbox.address, "Weekly newsletter")
    emails = page.request.get("/api/v1/emails").json()["data"]
    by_subject = {e["subject"]: e["labels"] for e in emails}
    assert by_subject["Invoice 2024-17 for March"] == [
        {"key": "invoices", "source": "rule", "confidence": 1.0}
    ]
    assert by_subject["Weekly newsletter"] == []

    page.goto("/labels/")
    row = page.locator('tr[data-label="invoices"]')
    expect(row).to_contain_text("Invoices")
    expect(row).to_contain_text("subject contains “invoice”")
    expect(row.locator("td").nth(4)).to_have_text("1")
    screenshot(page, "labels")
    page.set_viewport_size(PHONE)
    assert horizontal_overflow(page) <= 0


def test_tester_uses_a_recent_email(page, team: Team, stack: Stack) -> None:
    inbox = inbox_services.inbox_create(workspace=team.workspace, local_part="recent")
    _send(stack, inbox.address, "Receipt for your order", body="Total: 12 EUR")
    label_services.label_create(
        workspace=team.workspace,
        key="receipts",
        name="Receipts",
        rules={
            "match": "all",
            "conditions": [
                {
                    "field": "subject",
                    "op": "contains",
                    "value": "receipt",
                    "name": "",
                    "negate": False,
                },
                {
                    "field": "from",
                    "op": "domain",
                    "value": "shop.example",
                    "name": "",
                    "negate": False,
                },
            ],
        },
        by=Actor.system("tests"),
    )
    login(page, "admin@acme.test")
    page.goto("/labels/receipts/edit/")
    page.locator("#tester").get_by_label("Sample").select_option(
        label="Receipt for your order — billing@shop.example"
    )
    expect(page.locator("#tester").get_by_label("Subject")).to_be_hidden()
    page.locator("#tester").get_by_role("button", name="Test").click()
    verdict = page.locator("[data-test-result]")
    expect(verdict).to_have_attribute("data-matched", "true")
    expect(verdict).to_contain_text('subject contains "receipt" and from domain "shop.example"')


def test_malformed_rules_are_explained_and_nothing_is_saved(page, team: Team) -> None:
    login(page, "owner@acme.test")
    page.goto("/labels/new/")
    page.get_by_label("Key").fill("broken")
    page.get_by_label("Name").fill("Broken")
    rules = page.get_by_label("Rule (JSON)")

    rules.fill('{"match": "any", "conditions": [')  # not JSON
    page.get_by_role("button", name="Create label").click()
    expect(page.locator(".errorlist")).to_contain_text("The rule is not valid JSON:")
    expect(page.get_by_label("Rule (JSON)")).to_have_value('{"match": "any", "conditions": [')

    bad = {"match": "some", "conditions": [{"field": "subject", "op": "sounds_like", "value": "x"}]}
    page.get_by_label("Rule (JSON)").fill(json.dumps(bad))
    # The tester reports the API's coded issues in the same words, before saving.
    page.locator("#tester").get_by_role("button", name="Test").click()
    problem = page.locator("[data-test-error]")
    expect(problem).to_contain_text("The rule has a problem:")
    expect(problem).to_contain_text("Condition 1, “op”: Must be one of contains")
    expect(problem).to_contain_text("(rules.conditions.0.op)")
    allow_console_error(page, "400")  # the API's answer to the tester: 400 validation_error

    page.get_by_role("button", name="Create label").click()
    errors = page.locator(".errorlist")
    expect(errors).to_contain_text("“match”: Must be 'any' or 'all'. (rules.match)")
    expect(errors).to_contain_text(
        "Condition 1, “op”: Must be one of contains, equals, starts_with, ends_with, regex, "
        "domain, exists. (rules.conditions.0.op)"
    )
    page.get_by_label("Rule (JSON)").fill(
        json.dumps({"conditions": [{"field": "subject", "op": "regex", "value": "(unclosed"}]})
    )
    page.get_by_role("button", name="Create label").click()
    expect(page.locator(".errorlist")).to_contain_text(
        "Condition 1, “value”: Not a valid regular expression"
    )

    page.get_by_label("Key").fill("Not A Key")
    page.get_by_label("Rule (JSON)").fill("")
    page.get_by_role("button", name="Create label").click()
    expect(page.locator(".errorlist")).to_contain_text(
        "This value does not match the required pattern."
    )
    assert not Label.objects.exists()


def test_duplicate_key_and_disabled_classifier_are_plain_errors(page, team: Team) -> None:
    label_services.label_create(
        workspace=team.workspace, key="taken", name="Taken", by=Actor.system("tests")
    )
    team.workspace.classifier_enabled = False
    team.workspace.save(update_fields=["classifier_enabled"])
    login(page, "owner@acme.test")
    page.goto("/labels/new/")
    page.get_by_label("Key").fill("taken")
    page.get_by_label("Name").fill("Again")
    page.get_by_role("button", name="Create label").click()
    expect(page.locator(".errorlist")).to_contain_text("A label 'taken' exists.")
    page.get_by_label("Key").fill("question")
    page.get_by_label("Classifier question").fill("Is this a newsletter?")
    page.get_by_role("button", name="Create label").click()
    expect(page.get_by_role("alert")).to_contain_text(
        "The classifier is disabled for this workspace"
    )
    assert list(Label.objects.values_list("key", flat=True)) == ["taken"]


def test_edit_and_delete_a_label(page, team: Team) -> None:
    label_services.label_create(
        workspace=team.workspace, key="news", name="News", rules={}, by=Actor.system("tests")
    )
    login(page, "owner@acme.test")
    page.goto("/labels/")
    page.get_by_role("link", name="Edit news").click()
    assert page.get_by_label("Key").count() == 0  # the key is fixed
    page.get_by_label("Name").fill("Newsletters")
    page.get_by_text("Example rule").click()
    page.get_by_role("button", name="Use this example").click()
    page.get_by_label("Enabled").uncheck()
    page.get_by_role("button", name="Save label").click()
    expect(page.get_by_role("status")).to_have_text("Label “Newsletters” saved.")
    label = Label.objects.get(key="news")
    assert label.name == "Newsletters" and not label.enabled
    assert label.rules["conditions"][1]["op"] == "domain"
    page.goto("/labels/")
    expect(page.locator('tr[data-label="news"]')).to_contain_text("disabled")

    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Delete news").click()
    expect(page.get_by_role("status")).to_have_text(
        "Label “Newsletters” deleted and removed from every email."
    )
    assert not Label.objects.exists()


def test_members_read_and_test_but_cannot_change_labels(page, team: Team) -> None:
    label_services.label_create(
        workspace=team.workspace,
        key="invoices",
        name="Invoices",
        rules=INVOICE_RULE,
        by=Actor.system("tests"),
    )
    login(page, "member@acme.test")
    page.goto("/labels/")
    assert page.get_by_role("link", name="New label").count() == 0
    assert page.get_by_role("button", name="Delete invoices").count() == 0
    page.get_by_role("link", name="View and test invoices").click()
    expect(page.get_by_label("Name")).to_be_disabled()
    assert page.get_by_role("button", name="Save label").count() == 0
    _test_sample(page, "Invoice attached")
    expect(page.locator("[data-test-result]")).to_have_attribute("data-matched", "true")

    page.goto("/labels/new/")
    expect(page.locator("[data-forbidden]")).to_contain_text(
        "Only admins and owners of Acme can do this."
    )
    allow_console_error(page, "403")
    # A forged POST is refused too.
    token = page.context.cookies()
    csrf = next(c["value"] for c in token if c["name"] == "csrftoken")
    response = page.request.post(
        "/labels/invoices/delete/",
        form={"csrfmiddlewaretoken": csrf},
        headers={"X-CSRFToken": csrf},
    )
    assert response.status == 403
    response = page.request.post(
        "/labels/invoices/edit/",
        form={"csrfmiddlewaretoken": csrf, "name": "Hacked", "color": "violet", "threshold": "0.7"},
        headers={"X-CSRFToken": csrf},
    )
    assert response.status == 403
    assert Label.objects.get(key="invoices").name == "Invoices"

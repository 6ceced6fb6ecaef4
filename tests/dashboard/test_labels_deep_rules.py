"""The label editor with a rule nested 50,000 levels deep (issue 23, item 10, in the dashboard): the
form parsed it with ``json.loads``, which ended in a ``RecursionError`` and a server error page.
It is now explained next to the field like any other JSON mistake, and nothing is saved."""

from __future__ import annotations

from playwright.sync_api import expect

from labels.models import Label
from tests.dashboard.conftest import Team, allow_console_error, login


def test_a_rule_nested_too_deep_is_explained_and_nothing_is_saved(page, team: Team) -> None:
    login(page, "owner@acme.test")
    page.goto("/labels/new/")
    page.get_by_label("Key").fill("deep")
    page.get_by_label("Name").fill("Deep")
    page.get_by_label("Rule (JSON)").fill("[" * 50_000 + "]" * 50_000)
    page.get_by_role("button", name="Create label").click()
    expect(page.locator(".errorlist")).to_contain_text(
        "The rule is not valid JSON: arrays and objects nest deeper than 64 levels."
    )
    assert not Label.objects.filter(key="deep").exists()


def test_the_tester_explains_a_rule_nested_too_deep(page, team: Team) -> None:
    """The inline tester sends the draft to ``POST /labels/test``; the API's answer is shown."""
    login(page, "owner@acme.test")
    page.goto("/labels/new/")
    page.get_by_label("Rule (JSON)").fill("[" * 50_000 + "]" * 50_000)
    page.locator("#tester").get_by_label("Subject").fill("Hello")
    page.locator("#tester").get_by_role("button", name="Test").click()
    expect(page.locator("[data-test-error]")).to_contain_text(
        "arrays and objects nest deeper than 64 levels"
    )
    allow_console_error(page, "400")  # the API's answer to the tester: 400 invalid_json

"""The page a person sees when sign-in is paused after too many failures (issue 23, item 6)."""

from __future__ import annotations

from typing import Any

from django.conf import settings

from tests.dashboard.conftest import PASSWORD, Team, allow_console_error, screenshot


def _try(page: Any, password: str) -> None:
    page.goto("/login/")
    page.get_by_label("E-mail").fill("owner@acme.test")
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Sign in").click()
    page.get_by_role("alert").wait_for()


def test_the_lockout_page_says_what_happened_and_what_to_do(page: Any, team: Team) -> None:
    for n in range(settings.AXES_FAILURE_LIMIT):
        _try(page, f"wrong-{n}")
    _try(page, PASSWORD)
    page.get_by_role("heading", name="Too many failed sign-ins").wait_for()
    text = page.locator("main").inner_text()
    assert "Try again in 15 minutes" in text and "axes_reset_username" in text
    assert page.locator("[data-user]").count() == 0
    screenshot(page, "signin-locked-out")
    page.get_by_role("link", name="Back to sign in").click()
    page.get_by_role("heading", name="Sign in to Pigeonhole").wait_for()
    allow_console_error(page, "429")

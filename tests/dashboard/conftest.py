"""Browser fixtures for the dashboard: a live stack, Chromium through Playwright, people.

``stack`` runs daphne (ASGI, so the SSE stream works) and ``manage.py smtpd`` as separate
processes against the test database; tests that use it need committed data, so ``page`` pulls
in ``transactional_db``. ``page`` is a fresh browser context at desktop size whose test fails
on any console error or uncaught exception in the page. Sign in with ``login(page, email)``,
make people with ``team`` / ``add_person``, capture both widths with ``screenshot(page, name)``.
"""

from __future__ import annotations

import os
import shutil
import signal
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import AbstractBaseUser

from apikeys import services as key_services
from apikeys.audit import Actor
from apikeys.models import Membership, Role, Workspace
from tests.live import ROOT, Stack

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
PASSWORD = "correct-horse-battery-9"
SCREENSHOTS = ROOT / "var" / "screenshots"
DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 375, "height": 812}


# --- the live stack ----------------------------------------------------------------------------


@pytest.fixture(scope="package")
def stack(django_db_setup: None, django_db_blocker: Any) -> Iterator[Stack]:
    from django.db import connection

    running = Stack(connection.settings_dict["NAME"])
    for process in (running.web, running.smtp):
        # The servers must keep Django's async-safety checks (see ``_playwright``).
        process.env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    running.start()  # each process keeps its last stderr lines in ``process.logs``
    yield running
    running.stop()


# --- the browser -------------------------------------------------------------------------------


@pytest.fixture(scope="package")
def _playwright() -> Iterator[Any]:
    if not (Path(CHROMIUM).exists() or shutil.which(CHROMIUM)):
        pytest.fail(
            f"Chromium not found at {CHROMIUM}: the dashboard tests drive Debian's Chromium. "
            "Install it with `make browser` (apt-get install chromium) or set CHROMIUM=/path.",
            pytrace=False,
        )
    from playwright.sync_api import sync_playwright

    # Sync Playwright keeps an asyncio loop running in this thread (in a greenlet), so Django
    # would refuse ORM calls made by the test itself with SynchronousOnlyOperation. The test
    # code is plain synchronous code, so the check is a false alarm here; it is switched off
    # only while the browser runs (package scope) and never for the server processes.
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    manager = sync_playwright().start()
    try:
        yield manager
    finally:
        manager.stop()
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


def launch_chromium(playwright: Any) -> Any:
    """Debian's Chromium, headless, marked with a switch of its own (Chromium ignores unknown
    switches) so that :func:`close_chromium` can find its processes."""
    marker = f"--pgh-browser={uuid.uuid4().hex}"
    chromium = playwright.chromium.launch(
        executable_path=CHROMIUM, args=["--no-sandbox", marker], headless=True
    )
    chromium.pgh_marker = marker
    return chromium


def kill_marked(marker: str) -> int:
    """SIGKILLs every process whose command line holds ``marker``; returns how many."""
    killed = 0
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and marker.encode() in (proc / "cmdline").read_bytes():
                os.kill(int(proc.name), signal.SIGKILL)
                killed += 1
        except (OSError, ProcessLookupError):
            continue
    return killed


def close_chromium(chromium: Any, limit: float = 30.0) -> None:
    """``close()``, which has no timeout and once waited forever at the end of a CI run (all tests
    passed) for a browser that had rendered the hostile corpus: after ``limit`` seconds the
    browser's processes are killed, which ends the wait."""
    marker = getattr(chromium, "pgh_marker", None)
    watchdog = threading.Timer(limit, kill_marked, [marker]) if marker else None
    if watchdog is not None:
        watchdog.daemon = True
        watchdog.start()
    from playwright.sync_api import Error as PlaywrightError

    try:
        chromium.close()
    except PlaywrightError:  # the browser was already gone, or the watchdog took it down
        pass
    finally:
        if watchdog is not None:
            watchdog.cancel()


@pytest.fixture(scope="package")
def browser(_playwright: Any) -> Iterator[Any]:
    chromium = launch_chromium(_playwright)
    yield chromium
    close_chromium(chromium)


@pytest.fixture
def page(browser: Any, stack: Stack, transactional_db: None) -> Iterator[Any]:
    """A fresh context (no cookies) on the live stack; any console error fails the test.

    A test that provokes an error on purpose (a 403 page logs "Failed to load resource")
    declares it with ``allow_console_error(page, "403")``.
    """
    context = browser.new_context(base_url=stack.base_url, viewport=DESKTOP)
    context.set_default_timeout(10_000)
    tab = context.new_page()
    errors: list[str] = []
    tab.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    tab.on("pageerror", lambda exc: errors.append(f"uncaught: {exc}"))
    tab.console_errors = errors
    yield tab
    context.close()
    assert not errors, f"browser console errors: {errors}"


def allow_console_error(page: Any, fragment: str) -> None:
    """Drops the expected console errors containing ``fragment`` (fails if there is none)."""
    matching = [e for e in page.console_errors if fragment in e]
    assert matching, f"expected a console error with {fragment!r}, got {page.console_errors}"
    page.console_errors[:] = [e for e in page.console_errors if fragment not in e]


# --- people ------------------------------------------------------------------------------------


def add_person(
    workspace: Workspace, email: str, role: str = Role.MEMBER, password: str = PASSWORD
) -> Membership:
    """A user (password ``PASSWORD`` unless given) with ``role`` in ``workspace``."""
    user = key_services.user_get_or_create(email=email, password=password)
    return key_services.membership_set(
        workspace=workspace, user=user, role=role, by=Actor.system("tests")
    )


@dataclass
class Team:
    workspace: Workspace
    owner: AbstractBaseUser
    admin: AbstractBaseUser
    member: AbstractBaseUser
    password: str = PASSWORD


@pytest.fixture
def team(transactional_db: None) -> Team:
    """Acme with owner@acme.test, admin@acme.test and member@acme.test (password PASSWORD)."""
    workspace = key_services.workspace_get_or_create(name="Acme")
    return Team(
        workspace=workspace,
        owner=add_person(workspace, "owner@acme.test", Role.OWNER).user,
        admin=add_person(workspace, "admin@acme.test", Role.ADMIN).user,
        member=add_person(workspace, "member@acme.test", Role.MEMBER).user,
    )


def login(page: Any, email: str, password: str = PASSWORD) -> None:
    """Signs in through /login/ like a person would, and waits for the signed-in page."""
    page.goto("/login/")
    page.get_by_label("E-mail").fill(email)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Sign in").click()
    page.locator("[data-user]").wait_for()


# --- looking at pages --------------------------------------------------------------------------


def screenshot(page: Any, name: str) -> tuple[Path, Path]:
    """Saves ``var/screenshots/{name}-desktop.png`` (1280×800) and ``{name}-phone.png`` (375×812),
    the whole page, then restores the viewport.

    The page is laid out at each width, then shot through a viewport as tall as the page: a
    full-page capture draws a cross-process frame (the email's sandboxed HTML) only where it was
    on screen, and leaves the rest of it blank. Each frame is waited for until its document has
    the frame's size (Chromium hands it over once the frame is in view)."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    before = page.viewport_size or DESKTOP
    paths = []
    for label, size in (("desktop", DESKTOP), ("phone", PHONE)):
        page.set_viewport_size(size)
        height = page.evaluate("() => document.documentElement.scrollHeight")
        page.set_viewport_size({"width": size["width"], "height": max(height, size["height"])})
        _frames_have_their_size(page)
        path = SCREENSHOTS / f"{name}-{label}.png"
        page.screenshot(path=str(path), full_page=True)
        paths.append(path)
    page.set_viewport_size(before)
    return paths[0], paths[1]


def _frames_have_their_size(page: Any) -> None:
    """Waits until every shown frame's document has the frame's height as its viewport."""
    for element in page.locator("iframe:visible").element_handles():
        inside = element.content_frame()
        height = element.evaluate("(f) => f.clientHeight")
        inside.wait_for_function("(h) => window.innerHeight === h", arg=height)


def horizontal_overflow(page: Any) -> int:
    """How many CSS pixels the page is wider than the viewport (0 when nothing overflows)."""
    return page.evaluate(
        "() => Math.max(document.documentElement.scrollWidth, document.body.scrollWidth)"
        " - window.innerWidth"
    )

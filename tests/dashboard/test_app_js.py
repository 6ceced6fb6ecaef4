"""The shared dashboard behaviours of static/js/app.js, in the browser on a real page."""

from __future__ import annotations

import smtplib
from datetime import UTC, datetime, timedelta

from inboxes import services as inbox_services
from tests.dashboard.conftest import Team, login
from tests.live import Stack

ADD = """(html) => { const div = document.createElement('div'); div.id = 'probe';
  div.innerHTML = html; document.querySelector('main').appendChild(div); }"""


def _iso(delta: timedelta) -> str:
    return (datetime.now(UTC) + delta).isoformat()


def test_countdown_and_relative_times(page, team: Team) -> None:
    login(page, "owner@acme.test")
    page.evaluate(
        ADD,
        f'<time id="soon" data-countdown="{_iso(timedelta(minutes=12, seconds=20))}">x</time>'
        f'<time id="gone" data-countdown="{_iso(timedelta(seconds=-5))}">x</time>'
        f'<time id="ago" data-relative datetime="{_iso(timedelta(minutes=-3))}">x</time>',
    )
    page.wait_for_function("() => document.getElementById('soon').textContent !== 'x'")
    assert page.locator("#soon").inner_text() == "expires in 12 min"
    assert page.locator("#gone").inner_text() == "expired"
    assert page.locator("#ago").inner_text() == "3 min ago"
    assert page.locator("#ago").get_attribute("title")  # the full time on hover


def test_copy_button(page, team: Team) -> None:
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    login(page, "owner@acme.test")
    page.evaluate(ADD, '<button type="button" class="btn" data-copy="pgh_secret">Copy</button>')
    button = page.get_by_role("button", name="Copy")
    button.click()
    page.get_by_role("button", name="Copied").wait_for()
    assert page.evaluate("() => navigator.clipboard.readText()") == "pgh_secret"
    page.get_by_role("button", name="Copy").wait_for()  # the label comes back


def test_stream_element_receives_live_events_and_refreshes(page, team: Team, stack: Stack) -> None:
    inbox = inbox_services.inbox_create(workspace=team.workspace, local_part="live")
    login(page, "member@acme.test")
    page.goto("/members/")
    # Make <main id="content"> a live region of this inbox's stream, as a page template would.
    page.evaluate(
        """(url) => { window.seen = [];
          document.addEventListener('pigeonhole:event', e => window.seen.push(e.detail));
          const main = document.getElementById('content');
          main.insertAdjacentHTML('beforeend', '<p id="sentinel">stale</p>');
          main.dataset.stream = url; main.setAttribute('data-stream-refresh', '');
          window.pigeonhole.listen(main); }""",
        f"/api/v1/inboxes/{inbox.pk}/stream",
    )
    page.wait_for_function(
        "() => document.getElementById('content').dataset.streamState === 'open'"
    )
    with smtplib.SMTP("127.0.0.1", stack.smtp_port, timeout=30) as smtp:
        smtp.sendmail(
            "shop@example.com",
            [inbox.address],
            b"From: shop@example.com\r\nSubject: Your code is 482913\r\n\r\nCode: 482913\r\n",
        )
    page.wait_for_function("() => window.seen.some(e => e.type === 'email.received')")
    event = page.evaluate("() => window.seen.find(e => e.type === 'email.received')")
    assert event["data"]["inboxId"] == inbox.pk and event["id"]
    # data-stream-refresh re-rendered the region from the server: the stale node is gone.
    page.locator("#sentinel").wait_for(state="detached")
    assert page.get_by_role("heading", name="Members of Acme").count() == 1

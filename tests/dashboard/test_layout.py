"""The dashboard's layout at a desktop (1280×800) and a phone (375×812) width, in Chromium on the
live stack, with every page full of data: nothing sits outside the viewport or its card (tables
included: a row's actions stay reachable), the phone header is compact, the navigation names
Domains and Members for the roles that may use them, "Extend" is not offered on a permanent inbox,
the chart's axis labels stay inside the SVG, form labels keep their distance from the field
above, and an HTML email's frame is as tall as the mail and reads in a sans-serif font."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.template.loader import render_to_string
from playwright.sync_api import expect

from apikeys import services as key_services
from apikeys.audit import Actor
from apikeys.models import Membership, Role
from inboxes import services as inbox_services
from inboxes.models import Inbox
from labels import services as label_services
from mail.models import Email
from mail.pipeline import receive_one
from outbox.overview import mail_chart
from tests.dashboard.conftest import DESKTOP, PHONE, SCREENSHOTS, Team, login, screenshot
from tests.live import Stack
from webhooks import services as webhook_services

WIDTHS = {"desktop": DESKTOP, "phone": PHONE}

# Every element of the page (the frame's document is not part of it): its right edge must not pass
# the viewport's nor its card's, and its left edge must not pass the viewport's left edge. Hidden
# things (no box, visually hidden like .sr-only, inside a closed <details>) and the inside of the two boxes that scroll
# sideways on purpose (<pre>, and the 72-hour chart, which keeps readable bars on a phone) are
# left out. Returns the offenders as short descriptions.
OVERFLOW_JS = """
() => {
  const slack = 1;
  const width = document.documentElement.clientWidth;
  const out = [];
  const describe = (el) => {
    const text = (el.innerText || el.getAttribute('aria-label') || '').trim().slice(0, 40);
    return el.tagName.toLowerCase() + (el.className && typeof el.className === 'string'
      ? '.' + el.className.trim().split(/\\s+/).join('.') : '') + (text ? ` "${text}"` : '');
  };
  for (const el of document.body.querySelectorAll('*')) {
    if (el.closest('.sr-only, pre, .chart-scroll *, script, title, desc, option, head')) continue;
    const rect = el.getBoundingClientRect();
    if (rect.width === 0 || rect.height === 0) continue;
    const style = getComputedStyle(el);
    if (style.visibility === 'hidden' || style.display === 'none') continue;
    let clipped = false;  // visually hidden (clip: rect(0 0 0 0)), like .sr-only
    for (let up = el; up && !clipped; up = up.parentElement) {
      clipped = getComputedStyle(up).clip.startsWith('rect');
    }
    if (clipped) continue;
    const details = el.parentElement && el.parentElement.closest('details:not([open])');
    if (details && !el.closest('summary')) continue;
    if (rect.right > width + slack || rect.left < -slack) {
      out.push(`${describe(el)} spans ${Math.round(rect.left)}..${Math.round(rect.right)}, viewport ${width}`);
      continue;
    }
    const card = el.parentElement && el.parentElement.closest('.card');
    if (card) {
      const box = card.getBoundingClientRect();
      if (rect.right > box.right + slack) {
        out.push(`${describe(el)} ends at ${Math.round(rect.right)}, its card at ${Math.round(box.right)}`);
      }
    }
  }
  return out;
}
"""


@dataclass
class Full:
    """A workspace with something on every page."""

    team: Team
    permanent: Inbox
    disposable: Inbox
    short_mail: Email
    long_mail: Email
    plain_mail: Email
    label_key: str
    endpoint_id: str
    item_id: str


def _deliver(inbox: Inbox, subject: str, *, html: str = "", text: str = "") -> Email:
    if html:
        boundary = "b0undary"
        body = (
            f'Content-Type: multipart/alternative; boundary="{boundary}"\r\n\r\n'
            f"--{boundary}\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n{text or subject}\r\n"
            f"--{boundary}\r\nContent-Type: text/html; charset=utf-8\r\n\r\n{html}\r\n"
            f"--{boundary}--\r\n"
        )
    else:
        body = f"Content-Type: text/plain; charset=utf-8\r\n\r\n{text}\r\n"
    raw = (
        f"From: Acme Shop <orders@shop.example.com>\r\nTo: {inbox.address}\r\n"
        f"Subject: {subject}\r\nMIME-Version: 1.0\r\n{body}"
    ).encode()
    receive_one(raw, to=inbox.address, mail_from="orders@shop.example.com")
    return Email.objects.filter(inbox=inbox, subject=subject).latest("received_at")


SHORT_HTML = "<p>Your code is <b>482913</b>.</p>"
LONG_HTML = "".join(
    f"<h2>Section {n}</h2><p>{'Lorem ipsum dolor sit amet, consectetur adipiscing elit. ' * 6}</p>"
    for n in range(1, 31)
)


@pytest.fixture
def full(team: Team, stack: Stack) -> Full:
    ws = team.workspace
    owner = Membership.objects.get(workspace=ws, user=team.owner)
    permanent = inbox_services.inbox_create(
        workspace=ws,
        local_part="support-desk-for-customers",
        ttl_minutes=None,
        name="Customer support desk",
        agent_name="support-agent-v2",
        tags=["support", "production", "eu-west"],
    )
    disposable = inbox_services.inbox_create(
        workspace=ws,
        local_part="signup-test-run-20261126-a1b2c3",
        ttl_minutes=60,
        agent_name="signup-bot",
        tags=["ci", "signup"],
    )
    plain = _deliver(
        permanent, "Welcome aboard", text="Your verification code is 482913.\nhttps://acme.test/v"
    )
    short = _deliver(permanent, "Short HTML mail", html=SHORT_HTML)
    long = _deliver(disposable, "A very long newsletter with many sections", html=LONG_HTML)
    key_services.api_key_create(
        workspace=ws,
        name="Continuous integration signup tests (nightly)",
        scopes=("read", "write", "send"),
        expires_in_days=30,
        require_approval=True,
        created_by=team.owner,
        by=Actor.system("tests"),
    )
    sender_key = key_services.api_key_create(
        workspace=ws,
        name="Outbound agent",
        scopes=("send",),
        require_approval=True,
        by=Actor.system("tests"),
    )
    key_services.api_key_create(
        workspace=ws, name="Reader", scopes=("read",), by=Actor.system("tests")
    )
    label_services.label_create(
        workspace=ws,
        key="invoices",
        name="Invoices and receipts",
        rules={
            "match": "any",
            "conditions": [{"field": "subject", "op": "contains", "value": "x"}],
        },
        by=Actor.system("tests"),
    )
    endpoint, _ = webhook_services.endpoint_create(
        workspace=ws,
        url="https://hooks.example.com/services/T0000/B0000/a-rather-long-webhook-path",
        events=["email.received", "email.labeled", "inbox.expired"],
        inbox_ids=[],
        label_keys=[],
        by=Actor.system("tests"),
    )
    webhook_services.send_test(endpoint=endpoint)
    inbox_services.domain_add(
        workspace=ws, domain="mail.acme-corporation-example.test", by=Actor.system("tests")
    )
    key_services.invitation_create(
        actor=owner, email="newcomer@acme.test", role=Role.MEMBER, by=Actor.system("tests")
    )
    with stack.client(sender_key.plain) as api:
        response = api.post(
            f"inboxes/{permanent.pk}/send",
            json={
                "to": [disposable.address, "someone.with.a.long.address@partner.example.com"],
                "subject": "Re: your order 1234 and the delivery window we talked about",
                "text": "Hello,\nthe parcel leaves tomorrow.",
                "html": "<p>Hello,</p><p>the parcel leaves <b>tomorrow</b>.</p>",
                "reason": "Answers the customer's question about the delivery",
            },
        )
        assert response.status_code == 202, response.text
        item_id = response.json()["id"]
    return Full(
        team=team,
        permanent=permanent,
        disposable=disposable,
        short_mail=short,
        long_mail=long,
        plain_mail=plain,
        label_key="invoices",
        endpoint_id=endpoint.pk,
        item_id=item_id,
    )


def _pages(full: Full) -> dict[str, str]:
    return {
        "overview": "/",
        "inboxes": "/inboxes/",
        "inbox": f"/inboxes/{full.permanent.pk}/",
        "inbox-disposable": f"/inboxes/{full.disposable.pk}/",
        "email": f"/emails/{full.short_mail.pk}/",
        "email-plain": f"/emails/{full.plain_mail.pk}/",
        "domains": "/domains/",
        "keys": "/keys/",
        "labels": "/labels/",
        "label-edit": f"/labels/{full.label_key}/edit/",
        "label-new": "/labels/new/",
        "webhooks": "/webhooks/",
        "webhook": f"/webhooks/{full.endpoint_id}/",
        "webhook-new": "/webhooks/new/",
        "approvals": "/approvals/",
        "approval": f"/approvals/{full.item_id}/",
        "approvals-history": "/approvals/history/",
        "outgoing": "/approvals/outgoing/",
        "members": "/members/",
        "settings": "/settings/",
        "audit": "/audit/",
        "inbox-new": "/inboxes/new/",
        "password": "/password/",
    }


def _open_everything(page: Any) -> None:
    """Opens every <details> so what it hides is measured too (the page's own menus stay)."""
    page.evaluate(
        "() => document.querySelectorAll('main details').forEach((d) => { d.open = true; })"
    )


def test_nothing_leaves_the_viewport_or_its_card_on_any_page(page, full: Full) -> None:
    login(page, "owner@acme.test")
    problems: dict[str, list[str]] = {}
    for name, path in _pages(full).items():
        page.goto(path)
        page.locator("main").wait_for()
        for label, size in WIDTHS.items():
            page.set_viewport_size(size)
            _open_everything(page)
            found = page.evaluate(OVERFLOW_JS)
            if found:
                problems[f"{name} {label}"] = found[:6]
        screenshot(page, f"layout-{name}")
    assert not problems, "\n".join(f"{page}: {found}" for page, found in problems.items())


def test_row_actions_are_reachable_on_a_phone(page, full: Full) -> None:
    login(page, "owner@acme.test")
    page.set_viewport_size(PHONE)
    width = PHONE["width"]
    revoke = re.compile("^Revoke")
    delete = f"Delete {full.disposable.address}"
    extend = re.compile("^Extend")
    for path, row, role, name in (
        ("/keys/", "tr[data-key]", "button", revoke),
        ("/inboxes/", f'tr[data-inbox="{full.disposable.address}"]', "button", delete),
        ("/inboxes/", f'tr[data-inbox="{full.disposable.address}"]', "link", extend),
    ):
        page.goto(path)
        target = page.locator(row).first.get_by_role(role, name=name)
        expect(target).to_be_visible()
        box = target.bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width, (path, box)
        # Visible without scrolling sideways: the page never scrolled to show it.
        assert page.evaluate("() => window.scrollX") == 0


def test_phone_header_is_one_compact_row_with_a_menu(page, full: Full) -> None:
    login(page, "owner@acme.test")
    page.goto("/inboxes/")
    page.set_viewport_size(PHONE)
    header = page.locator("header.topbar")
    height = header.bounding_box()["height"]
    assert height <= 64, f"the phone header is {height} px tall"
    nav = page.get_by_role("navigation", name="Main")
    expect(nav).to_be_hidden()
    menu = page.get_by_role("button", name="Menu")
    expect(menu).to_have_attribute("aria-expanded", "false")
    menu.click()
    expect(menu).to_have_attribute("aria-expanded", "true")
    expect(nav.get_by_role("link", name="Keys")).to_be_visible()
    expect(page.get_by_role("button", name="Sign out")).to_be_visible()
    screenshot(page, "header-menu-open")  # the desktop half shows the plain header
    nav.get_by_role("link", name="Keys").click()
    page.get_by_role("heading", name="API keys of Acme").wait_for()
    expect(page.get_by_role("navigation", name="Main")).to_be_hidden()
    # At desktop width there is no menu button: the navigation is always there.
    page.set_viewport_size(DESKTOP)
    expect(page.get_by_role("button", name="Menu")).to_be_hidden()
    expect(page.get_by_role("navigation", name="Main")).to_be_visible()


@pytest.mark.parametrize(
    ("email", "shown"),
    [("owner@acme.test", True), ("admin@acme.test", True), ("member@acme.test", False)],
)
def test_navigation_names_domains_members_and_audit_log_for_the_roles_that_manage_them(
    page, team: Team, email: str, shown: bool
) -> None:
    login(page, email)
    nav = page.get_by_role("navigation", name="Main")
    for label, size in WIDTHS.items():
        page.set_viewport_size(size)
        page.goto("/")
        if label == "phone":
            page.get_by_role("button", name="Menu").click()
        for name, heading in (
            ("Domains", "Domains"),
            ("Members", "Members of Acme"),
            ("Audit log", "Audit log of Acme"),
        ):
            link = nav.get_by_role("link", name=name, exact=True)
            if not shown:
                expect(link).to_have_count(0)
                continue
            expect(link).to_be_visible()
            link.click()
            page.get_by_role("heading", name=heading, level=1).wait_for()
            if label == "phone":  # a new page: the menu is folded again
                page.get_by_role("button", name="Menu").click()
            expect(nav.get_by_role("link", name=name, exact=True)).to_have_attribute(
                "aria-current", "page"
            )


def test_extend_is_not_offered_on_a_permanent_inbox(page, full: Full) -> None:
    login(page, "owner@acme.test")
    for size in WIDTHS.values():
        page.set_viewport_size(size)
        page.goto("/inboxes/")
        permanent = page.locator(f'tr[data-inbox="{full.permanent.address}"]')
        disposable = page.locator(f'tr[data-inbox="{full.disposable.address}"]')
        expect(
            permanent.get_by_role("button", name=f"Delete {full.permanent.address}")
        ).to_be_visible()
        expect(permanent.get_by_role("link", name=re.compile("^Extend"))).to_have_count(0)
        expect(disposable.get_by_role("link", name=re.compile("^Extend"))).to_be_visible()


AXIS_JS = """
(svg) => {
  const box = svg.getBoundingClientRect();
  return Array.from(svg.querySelectorAll('text')).map((t) => {
    const r = t.getBoundingClientRect();
    return {text: t.textContent, inside: r.left >= box.left - 0.5 && r.right <= box.right + 0.5
      && r.top >= box.top - 0.5 && r.bottom <= box.bottom + 0.5};
  });
}
"""


@pytest.mark.parametrize("last_hour", [0, 12, 23])
def test_chart_axis_labels_stay_inside_the_svg(page, stack: Stack, last_hour: int) -> None:
    """The chart as the overview renders it, for a window that ends on a labelled hour (the
    label sits at the right edge) or not; measured in Chromium with the dashboard's styles."""
    end = datetime(2026, 11, 26, last_hour, tzinfo=UTC)
    series = [(end - timedelta(hours=71 - i), i % 5) for i in range(72)]
    chart = render_to_string("overview/_mail_chart.html", {"mail": mail_chart(series), "hours": 72})
    page.goto("/login/")  # the same origin, for the stylesheets
    page.set_content(
        f'<link rel="stylesheet" href="{stack.base_url}/static/css/app.css">'
        f'<link rel="stylesheet" href="{stack.base_url}/static/css/overview.css">'
        f'<main class="container">{chart}</main>'
    )
    page.wait_for_function("() => getComputedStyle(document.body).margin === '0px'")
    for size in WIDTHS.values():
        page.set_viewport_size(size)
        labels = page.locator("svg.mail-chart").evaluate(AXIS_JS)
        assert any(label["text"] == "12:00" for label in labels)
        outside = [label["text"] for label in labels if not label["inside"]]
        assert not outside, f"axis labels cut off: {outside}"


def test_chart_axis_labels_on_the_overview(page, full: Full) -> None:
    login(page, "owner@acme.test")
    for size in WIDTHS.values():
        page.set_viewport_size(size)
        page.goto("/")
        labels = page.locator("svg.mail-chart").evaluate(AXIS_JS)
        assert labels and all(label["inside"] for label in labels), labels


# For each label of a text-like field: the gap between the label's top and the bottom of whatever
# comes before it in the form (not its own ancestors). Checkbox and radio labels are left out.
GAPS_JS = """
(form) => {
  const all = Array.from(form.querySelectorAll('*')).filter((el) => {
    const r = el.getBoundingClientRect();
    const folded = el.parentElement && el.parentElement.closest('details:not([open])');
    return r.width > 0 && r.height > 0 && !el.closest('.sr-only')
      && !(folded && !el.closest('summary'));
  });
  const gaps = [];
  for (const label of form.querySelectorAll('label[for], legend')) {
    const control = label.htmlFor ? document.getElementById(label.htmlFor) : null;
    if (control && (control.type === 'checkbox' || control.type === 'radio')) continue;
    const index = all.indexOf(label);
    if (index <= 0) continue;
    const before = all.slice(0, index).filter((el) => !el.contains(label) && !label.contains(el));
    if (!before.length) continue;
    const lowest = before.reduce((a, b) =>
      b.getBoundingClientRect().bottom > a.getBoundingClientRect().bottom ? b : a);
    const bottom = lowest.getBoundingClientRect().bottom;
    gaps.push({label: label.textContent.trim(), gap: label.getBoundingClientRect().top - bottom,
      above: lowest.tagName + '.' + lowest.className});
  }
  return gaps;
}
"""


def test_form_labels_keep_their_distance_from_the_field_above(page, full: Full) -> None:
    login(page, "owner@acme.test")
    for path, form in (
        (f"/labels/{full.label_key}/edit/", "#label-form"),
        ("/labels/new/", "#label-form"),
        ("/webhooks/new/", "main form.form"),
        (f"/webhooks/{full.endpoint_id}/edit/", "main form.form"),
    ):
        page.goto(path)
        for size in WIDTHS.values():
            page.set_viewport_size(size)
            gaps = page.locator(form).evaluate(GAPS_JS)
            assert len(gaps) >= 3, (path, gaps)
            tight = [g for g in gaps if g["gap"] < 8]
            assert not tight, (
                f"{path} at {size['width']} px: labels against the field above: {tight}"
            )
    screenshot(page, "layout-webhook-edit")


# Measured inside the frame that shows the mail (Playwright reaches into its opaque origin): the
# mail's height, the frame's viewport as the mail sees it, and the font.
INSIDE_JS = """
() => ({
  content: document.documentElement.getBoundingClientRect().height,
  scroll: document.documentElement.scrollHeight,
  viewport: document.documentElement.clientHeight,
  font: getComputedStyle(document.body).fontFamily,
  size: parseFloat(getComputedStyle(document.body).fontSize),
})
"""


def _sized(page: Any, before: str | None = None) -> str:
    """Waits until the page has sized the frame (``data-sized`` holds the height it gave it; with
    ``before``, a height other than that one) and returns that height."""
    frame = page.locator("iframe.html-frame")
    if before is None:
        expect(frame).to_have_attribute("data-sized", re.compile(r"^[0-9]+$"))
    else:
        expect(frame).not_to_have_attribute("data-sized", before)
    return frame.get_attribute("data-sized") or ""


def _measure(page: Any) -> dict[str, Any]:
    """The frame as the page laid it out and the mail inside it, once the frame is on screen.

    Chromium renders the opaque-origin frame in a process of its own and, while the frame is
    below the fold (on a phone it starts under the first screen), may hold back its new size
    until it scrolls into view: the element is as tall as the mail, but the document inside
    still has the viewport it was created with (28rem). A person sees the frame on screen, so
    the test looks at it there, and waits for the size to arrive inside (docs/dashboard.md)."""
    frame = page.locator("iframe.html-frame")
    frame.scroll_into_view_if_needed()
    inside = frame.element_handle().content_frame()
    inside.wait_for_load_state("load")
    outer = frame.evaluate(
        "(f) => ({ height: f.getBoundingClientRect().height, inner: f.clientHeight,"
        " attribute: f.getAttribute('height'), sized: f.getAttribute('data-sized') })"
    )
    inside.wait_for_function("(h) => window.innerHeight === h", arg=outer["inner"])
    return {**inside.evaluate(INSIDE_JS), **outer, "sandbox": frame.get_attribute("sandbox")}


def _frame(page: Any, email: Email) -> dict[str, Any]:
    page.goto(f"/emails/{email.pk}/")
    _sized(page)
    return _measure(page)


def _assert_fits(label: str, measured: dict[str, Any]) -> None:
    # Still sandboxed without scripts, in an opaque origin.
    assert "allow-scripts" not in measured["sandbox"]
    assert "allow-same-origin" not in measured["sandbox"]
    # The frame is exactly as tall as the mail: the height the page gave it is its height, its
    # inside is the mail's height (within rounding up to a whole pixel), and nothing scrolls.
    assert measured["attribute"] == measured["sized"], (label, measured)
    assert abs(measured["height"] - int(measured["sized"])) < 0.5, (label, measured)
    assert 0 <= measured["inner"] - measured["content"] < 1.5, (label, measured)
    assert measured["scroll"] <= measured["viewport"], (label, measured)
    assert "sans-serif" in measured["font"], measured["font"]
    assert measured["size"] >= 14


def _screenshot_whole(page: Any, name: str) -> None:
    """A screenshot of the whole email page with the whole mail drawn: a full-page screenshot
    shows the cross-process frame only where it was on screen (Chromium draws such a frame's
    visible part), so the viewport is made as tall as the page for it."""
    size = page.viewport_size
    height = page.evaluate("() => document.documentElement.scrollHeight")
    page.set_viewport_size({"width": size["width"], "height": height})
    _measure(page)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"))
    page.set_viewport_size(size)


def test_the_html_frame_is_as_tall_as_the_mail_in_a_readable_font(page, full: Full) -> None:
    login(page, "owner@acme.test")
    for label, size in WIDTHS.items():
        page.set_viewport_size(size)
        short = _frame(page, full.short_mail)
        _assert_fits(f"short {label}", short)
        assert short["height"] < 200, (label, short)
        assert page.evaluate(OVERFLOW_JS) == [], label
        _screenshot_whole(page, f"layout-email-short-{label}")
        long = _frame(page, full.long_mail)
        _assert_fits(f"long {label}", long)
        assert long["height"] > 1500, (label, long)
        assert page.evaluate(OVERFLOW_JS) == [], label
        _screenshot_whole(page, f"layout-email-long-{label}")


def test_the_frame_follows_the_width_and_the_tab(page, full: Full) -> None:
    """Narrowing the window re-wraps the mail: the frame grows with it, and shrinks back when the
    window widens. A mail opened on another tab is sized when its HTML tab is shown."""
    login(page, "owner@acme.test")
    wide = _frame(page, full.long_mail)
    page.set_viewport_size(PHONE)
    narrow_height = _sized(page, before=wide["sized"])
    narrow = _measure(page)
    _assert_fits("narrowed", narrow)
    assert narrow["height"] > wide["height"] + 200, (wide, narrow)
    page.set_viewport_size(DESKTOP)
    _sized(page, before=narrow_height)
    _assert_fits("widened", _measure(page))
    for label, size in WIDTHS.items():
        page.set_viewport_size(size)
        page.goto("/")  # a new document, not a jump within this one
        page.goto(f"/emails/{full.long_mail.pk}/#part-text")
        expect(page.locator("#part-html")).to_be_hidden()
        page.get_by_role("tab", name="HTML").click()
        _sized(page)
        _assert_fits(f"tab {label}", _measure(page))


def test_the_approval_preview_reads_in_the_same_font(page, full: Full) -> None:
    """The outgoing HTML part on the approval page gets the email frame's defaults too, before and
    after the approver edits the text (the live preview builds its own document)."""
    login(page, "owner@acme.test")
    page.goto(f"/approvals/{full.item_id}/")
    frame = page.locator("iframe[data-part-html]")
    for edit in (False, True):
        if edit:
            page.get_by_label("Text").fill("Hello,\nthe parcel leaves on Monday.")
            expect(frame).to_have_attribute("data-edited", "1")
        content = frame.element_handle().content_frame()
        content.wait_for_load_state("load")
        content.locator("body p").first.wait_for()
        font = content.evaluate("() => getComputedStyle(document.body).fontFamily")
        assert "sans-serif" in font, (edit, font)

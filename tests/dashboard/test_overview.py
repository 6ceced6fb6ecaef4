"""The overview page (``/``) in a real browser on the live stack: the numbers of GET /stats, the
mail-per-hour chart, webhooks, outbox, recent events and the empty state; plus the chart
selectors (``mail.selectors``, ``webhooks.selectors``) at the database level."""

from __future__ import annotations

import re
import smtplib
import time
from collections import Counter
from datetime import UTC, datetime, timedelta

import httpx
import pytest
import time_machine
from django.utils import timezone
from playwright.sync_api import expect

from apikeys import services as key_services
from apikeys.audit import Actor
from inboxes import services as inbox_services
from mail import pipeline
from mail import selectors as mail_selectors
from mail.models import Email
from outbox.overview import mail_chart
from tests.conftest import Api
from tests.dashboard.conftest import (
    PASSWORD,
    Team,
    horizontal_overflow,
    login,
    screenshot,
)
from tests.factories import WorkspaceFactory
from tests.live import embedded
from tests.mail.messages import message
from tests.outbox.conftest import Sink, sink  # noqa: F401  (a fixture)
from tests.webhooks.receiver import receiver  # noqa: F401  (a fixture)
from webhooks import selectors as webhook_selectors
from webhooks import services as webhook_services
from webhooks.models import Delivery, Endpoint

STAT_PATHS = [
    ("inboxes", "total"),
    ("inboxes", "active"),
    ("inboxes", "expired"),
    ("emails", "total"),
    ("emails", "last_24h"),
    ("emails", "unread"),
    ("outbox", "pending"),
    ("outbox", "sent"),
    ("outbox", "rejected"),
    ("outbox", "failed"),
    ("outbox", "expired"),
    ("webhooks", "deliveries_24h"),
    ("webhooks", "failed_24h"),
]


def _expected_title(hour: datetime, count: int) -> str:
    noun = "email" if count == 1 else "emails"
    return f"{count} {noun}, {hour:%H}:00 UTC, {hour:%a} {hour.day} {hour:%b}"


def _send(port: int, to: str, subject: str) -> None:
    raw = (
        f"From: Shop <shop@example.com>\r\nTo: {to}\r\nSubject: {subject}\r\n\r\n"
        f"Your verification code: 482913\r\n"
    ).encode()
    with smtplib.SMTP("127.0.0.1", port) as smtp:
        smtp.sendmail("shop@example.com", [to], raw)


def _expect_stats_match(page, api: httpx.Client) -> dict:  # type: ignore[no-untyped-def]
    body = api.get("/api/v1/stats").json()
    for group, name in STAT_PATHS:
        expect(page.locator(f'[data-stat="{group}.{name}"]')).to_have_text(str(body[group][name]))
    return body


# --- in the browser -----------------------------------------------------------------------------


def test_overview_shows_the_numbers_of_stats_and_the_charts(
    page,
    stack,
    team: Team,
    receiver,  # noqa: F811
    settings,
) -> None:  # type: ignore[no-untyped-def]
    key = key_services.api_key_create(
        workspace=team.workspace,
        name="overview",
        scopes=("read", "write", "send"),
        require_approval=True,
        by=Actor.system("tests"),
    ).plain
    api = httpx.Client(base_url=stack.base_url, headers={"Authorization": f"Bearer {key}"})
    inbox = api.post("/api/v1/inboxes", json={"local_part": "overview"}).json()
    # Embedded mode: `manage.py serve` delivers webhooks itself, to a receiver of the test.
    settings.WEBHOOK_ALLOW_PRIVATE_TARGETS = True
    webhook_services.endpoint_create(
        workspace=team.workspace,
        url=receiver.url if embedded() else "https://hooks.example.com/overview",
        events=["email.received"],
        inbox_ids=[],
        label_keys=[],
        by=Actor.system("tests"),
    )
    for n in range(3):
        _send(stack.smtp_port, inbox["address"], f"Your code, message {n}")
    sent = api.post(
        f"/api/v1/inboxes/{inbox['id']}/send",
        json={"to": ["someone@example.com"], "subject": "Hello from overview", "text": "Hi"},
    )
    assert sent.status_code == 202 and sent.json()["status"] == "pending"
    if embedded():  # the three deliveries made and recorded before the page is read
        receiver.wait_for(3, timeout=60)
        deadline = time.monotonic() + 60
        while (
            Delivery.objects.filter(workspace_id=team.workspace.pk, status="succeeded").count() < 3
        ):
            assert time.monotonic() < deadline, "deliveries not recorded"
            time.sleep(0.1)

    login(page, "member@acme.test")
    page.goto("/")
    expect(page.get_by_role("heading", name="Overview of Acme")).to_be_visible()
    body = _expect_stats_match(page, api)
    assert body["emails"]["total"] == 3 and body["outbox"]["pending"] == 1
    assert body["webhooks"]["deliveries_24h"] == 3
    assert page.locator("[data-empty-state]").count() == 0

    # One bar per hour of the last 72; the hours that got mail carry their count in the title.
    chart = page.locator('svg[data-chart="mail"]')
    expect(chart.locator("g.bar")).to_have_count(72)
    per_hour = Counter(
        received.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
        for received in Email.objects.filter(workspace=team.workspace).values_list(
            "received_at", flat=True
        )
    )
    for hour, count in per_hour.items():
        bar = chart.locator(f'g.bar[data-hour="{hour.isoformat()}"]')
        expect(bar.locator("title")).to_have_text(_expected_title(hour, count))
        expect(bar.locator("rect.bar-fill")).to_have_count(1)
    expect(chart.locator("g.bar.has-mail")).to_have_count(len(per_hour))
    expect(chart.locator("desc")).to_contain_text("3 emails in all")
    # The text alternative: a table of the hours with mail.
    page.get_by_text("Show the hours with mail as a table").click()
    table = page.locator("details.chart-table table")
    expect(table.locator("tbody tr")).to_have_count(len(per_hour))

    if embedded():  # Webhooks: the three delivered by the one process
        expect(page.locator('[data-delivery="succeeded"]')).to_have_text("3")
        expect(page.locator('[data-delivery="pending"]')).to_have_text("0")
        expect(page.locator("[data-success-rate]")).to_have_text("100%")
    else:  # Webhooks: three deliveries not tried yet (the worker runs apart from this stack).
        expect(page.locator('[data-delivery="pending"]')).to_have_text("3")
        expect(page.locator("[data-success-rate]")).to_have_text("–")
    # Outgoing mail: horizontal bars by where it is (waiting, delivered, retrying …).
    outbox = page.locator('svg[data-chart="outbox"]')
    expect(outbox.locator('g[data-status="pending"]')).to_have_attribute("data-count", "1")
    expect(outbox.locator('g[data-status="delivered"]')).to_have_attribute("data-count", "0")
    expect(page.get_by_role("link", name="Decide on 1 waiting message")).to_be_visible()

    # Recent events, newest first, linked to the email and the inbox.
    events = page.locator("table.events tbody tr")
    expect(events.first).to_contain_text("Waiting for approval")
    received = page.locator('tr[data-event="email.received"]')
    expect(received).to_have_count(3)
    newest = Email.objects.filter(workspace=team.workspace).order_by("-id").first()
    assert newest is not None
    expect(received.first.get_by_role("link", name=newest.subject)).to_have_attribute(
        "href", f"/emails/{newest.pk}/"
    )
    expect(received.first.get_by_role("link", name=inbox["address"])).to_have_attribute(
        "href", f"/inboxes/{inbox['id']}/"
    )
    expect(received.first.locator("time[data-relative]")).to_have_attribute(
        "datetime", re.compile(r"^\d{4}-\d\d-\d\dT")
    )

    # Quick links.
    expect(page.get_by_role("link", name="Create an inbox").first).to_have_attribute(
        "href", "/inboxes/"
    )
    expect(page.get_by_role("link", name="API docs")).to_have_attribute("href", "/api/docs")

    screenshot(page, "overview")
    page.set_viewport_size({"width": 375, "height": 812})
    assert horizontal_overflow(page) <= 0

    # The page refreshes itself when it becomes visible again (and every minute).
    _send(stack.smtp_port, inbox["address"], "One more")
    page.evaluate("() => document.dispatchEvent(new Event('visibilitychange'))")
    expect(page.locator('[data-stat="emails.total"]')).to_have_text("4")
    expect(page.locator("#overview")).to_have_attribute("data-refreshed-at", re.compile(".+"))
    _expect_stats_match(page, api)


def test_new_workspace_shows_the_empty_state(page, team: Team) -> None:
    login(page, "owner@acme.test")
    page.goto("/")
    empty = page.locator("[data-empty-state]")
    expect(empty.get_by_role("heading", name="No mail yet")).to_be_visible()
    expect(empty).to_contain_text("This workspace has no inboxes.")
    expect(empty.get_by_role("link", name="Create an inbox")).to_have_attribute("href", "/inboxes/")
    expect(page.locator('[data-chart-empty="mail"]')).to_have_text(
        "No mail arrived in the last 72 hours."
    )
    expect(page.locator('[data-chart-empty="webhooks"]')).to_be_visible()
    expect(page.locator('[data-chart-empty="outbox"]')).to_be_visible()
    expect(page.locator('[data-stat="emails.total"]')).to_have_text("0")
    assert page.locator("svg[data-chart]").count() == 0
    screenshot(page, "overview-empty")
    page.set_viewport_size({"width": 375, "height": 812})
    assert horizontal_overflow(page) <= 0


def test_empty_state_names_the_address_to_write_to(page, team: Team) -> None:
    inbox = inbox_services.inbox_create(workspace=team.workspace, local_part="first-box")
    login(page, "member@acme.test")
    page.goto("/")
    empty = page.locator("[data-empty-state]")
    expect(empty).to_contain_text(f"Send a message to {inbox.address}")
    expect(empty.get_by_role("button", name="Copy address")).to_have_attribute(
        "data-copy", inbox.address
    )
    expect(page.locator('tr[data-event="inbox.created"]')).to_contain_text(inbox.address)


def test_signed_in_without_a_workspace_lands_on_plain_words(page, transactional_db) -> None:
    key_services.user_get_or_create(email="alone@example.com", password=PASSWORD)
    login(page, "alone@example.com")
    response = page.goto("/")
    assert response is not None and response.status == 200
    expect(page.get_by_role("heading", level=2)).to_contain_text("not in any workspace")


def test_only_the_current_workspace_is_counted(page, team: Team) -> None:
    other = WorkspaceFactory(name="Elsewhere")
    theirs = inbox_services.inbox_create(workspace=other, local_part="theirs")
    pipeline.receive_one(message(to=theirs.address, subject="Not yours"), to=theirs.address)
    login(page, "owner@acme.test")
    page.goto("/")
    expect(page.locator('[data-stat="emails.total"]')).to_have_text("0")
    expect(page.locator('[data-stat="inboxes.total"]')).to_have_text("0")
    assert "Not yours" not in page.content() and theirs.address not in page.content()


# --- the chart selectors ------------------------------------------------------------------------


@pytest.mark.django_db
def test_hourly_received_buckets_the_last_72_hours() -> None:
    workspace, other = WorkspaceFactory(), WorkspaceFactory()
    box = inbox_services.inbox_create(workspace=workspace, local_part="hours")
    theirs = inbox_services.inbox_create(workspace=other, local_part="hours-other")
    now = datetime(2025, 3, 5, 14, 30, tzinfo=UTC)
    moments = [
        now,  # this hour
        now - timedelta(minutes=29),  # 14:01, this hour
        now - timedelta(minutes=31),  # 13:59, the hour before
        now - timedelta(hours=71),  # 15:30 three days ago: the first bucket
        now - timedelta(hours=72),  # 14:30 three days ago: too old
    ]
    for moment in moments:
        email_id = pipeline.receive_one(message(to=box.address), to=box.address).email_id
        Email.objects.filter(pk=email_id).update(received_at=moment)
    pipeline.receive_one(message(to=theirs.address), to=theirs.address)

    series = mail_selectors.hourly_received(workspace, hours=72, now=now)
    assert len(series) == 72
    assert series[0] == (datetime(2025, 3, 2, 15, tzinfo=UTC), 1)
    assert series[-1] == (datetime(2025, 3, 5, 14, tzinfo=UTC), 2)
    assert series[-2] == (datetime(2025, 3, 5, 13, tzinfo=UTC), 1)
    assert sum(count for _, count in series) == 4

    chart = mail_chart(series)
    tallest = max(chart["bars"], key=lambda bar: bar.count)
    assert tallest.title == "2 emails, 14:00 UTC, Wed 5 Mar"
    assert tallest.height == chart["plot_height"]  # the scale tops at 2
    assert [g.label for g in chart["grid"]] == ["0", "1", "2"]
    assert chart["busiest"] == (datetime(2025, 3, 5, 14, tzinfo=UTC), 2)


@pytest.mark.django_db
def test_webhook_health_counts_the_last_day_and_the_success_rate() -> None:
    workspace = WorkspaceFactory()
    endpoint, _ = webhook_services.endpoint_create(
        workspace=workspace,
        url="https://hooks.example.com/x",
        events=["email.received"],
        inbox_ids=[],
        label_keys=[],
        by=Actor.system("tests"),
    )
    assert webhook_selectors.webhook_health(workspace).rate is None

    def delivery(status: str) -> None:
        Delivery.objects.create(
            endpoint=endpoint,
            workspace_id=workspace.pk,
            event="email.received",
            body="{}",
            status=status,
        )

    for status in ["succeeded"] * 7 + ["failed", "retrying", "pending", "pending"]:
        delivery(status)
    with time_machine.travel(timezone.now() - timedelta(hours=25)):
        delivery("failed")  # older than a day: not counted
    health = webhook_selectors.webhook_health(workspace)
    assert health.by_status == {"succeeded": 7, "failed": 1, "retrying": 1, "pending": 2}
    assert health.total == 11 and health.attempted == 9
    assert health.rate == pytest.approx(7 / 9)
    assert Endpoint.objects.count() == 1


def test_the_overview_counts_deliveries_not_hand_overs(
    page,
    team: Team,
    sink: Sink,  # noqa: F811
    settings,
) -> None:  # type: ignore[no-untyped-def]
    key = key_services.api_key_create(
        workspace=team.workspace,
        name="sender",
        scopes=("read", "write", "send"),
        by=Actor.system("tests"),
    )
    inbox = inbox_services.inbox_create(workspace=team.workspace, local_part="agent")
    colleague = inbox_services.inbox_create(workspace=team.workspace, local_part="colleague")
    api = Api(key.plain)

    def send(to: str, subject: str) -> dict:
        response = api.call(
            "POST", f"inboxes/{inbox.pk}/send", {"to": [to], "subject": subject, "text": "Hi"}
        )
        assert response.status_code == 200, response.content
        return response.json()

    # Every one of these answered "sent" (handed to delivery); only one reached the relay.
    sink.answers = ["250 2.0.0 Ok: queued as 1", "550 5.1.1 No such user", "421 4.7.0 Busy"]
    sent = [
        send("bob@example.com", "delivered"),
        send("gone@example.com", "refused for good"),
        send("busy@example.com", "deferred"),
        send(colleague.address, "to a colleague"),
    ]
    settings.OUTBOX_CAPTURE = True  # embedded mode without EMAIL_URL
    sent.append(send("carol@example.com", "captured"))
    assert [item["status"] for item in sent] == ["sent"] * 5
    assert len(sink.received) == 1

    login(page, "owner@acme.test")
    page.goto("/")
    outbox = page.locator('svg[data-chart="outbox"]')
    counts = {
        status: outbox.locator(f'g[data-status="{status}"]').get_attribute("data-count")
        for status in ("delivered", "internal", "failed", "retrying", "queued", "captured")
    }
    assert counts == {
        "delivered": "1",
        "internal": "1",
        "failed": "1",
        "retrying": "1",
        "queued": "0",
        "captured": "1",
    }
    expect(outbox.locator('g[data-status="sent"]')).to_have_count(0)
    expect(outbox.locator("title")).to_contain_text("1 delivered, 1 delivered here")
    expect(page.locator("[data-outbox-problems]")).to_have_attribute(
        "href", "/approvals/outgoing/?delivery=failed"
    )
    # The recent events say what happened: handed over, not "sent" in green.
    events = page.locator('table.events tr[data-event="outbound.sent"]')
    expect(events).to_have_count(5)
    expect(events.first).to_contain_text("Handed to delivery")
    expect(events.first.locator(".badge-ok")).to_have_count(0)
    expect(page.locator('tr[data-event="outbound.failed"]')).to_have_count(1)
    body = api.call("GET", "stats").json()
    assert body["outbox_delivery"] == {
        "queued": 0,
        "retrying": 1,
        "delivered": 1,
        "internal": 1,
        "captured": 1,
        "failed": 1,
    }
    assert body["outbox"]["sent"] == 4 and body["outbox"]["failed"] == 1

    # The outgoing-mail page lists every item (none needed approval) with its state and attempts.
    page.get_by_role("link", name="All outgoing mail").click()
    rows = page.locator("tr[data-item]")
    expect(rows).to_have_count(5)
    states = {
        row.get_attribute("data-item"): row.get_attribute("data-delivery-state")
        for row in rows.all()
    }
    assert states == {
        sent[0]["id"]: "delivered",
        sent[1]["id"]: "failed",
        sent[2]["id"]: "retrying",
        sent[3]["id"]: "internal",
        sent[4]["id"]: "captured",
    }
    deferred = page.locator(f'tr[data-item="{sent[2]["id"]}"]')
    expect(deferred.locator("[data-next-attempt]")).to_contain_text("next attempt")
    expect(deferred.locator("[data-attempts]")).to_have_text("1")
    expect(page.locator(f'tr[data-item="{sent[0]["id"]}"] [data-reply]')).to_have_text(
        "250 2.0.0 Ok: queued as 1"
    )
    expect(page.locator(f'tr[data-item="{sent[4]["id"]}"]')).to_contain_text("captured, not sent")
    screenshot(page, "outgoing-mail")
    page.set_viewport_size({"width": 375, "height": 812})
    assert horizontal_overflow(page) <= 0
    page.set_viewport_size({"width": 1280, "height": 800})
    page.get_by_label("Show").select_option(label="Retrying")
    page.get_by_role("button", name="Filter").click()
    expect(rows).to_have_count(1)
    rows.first.get_by_role("link", name="deferred").click()
    attempts = page.locator("[data-attempt-log] tr[data-attempt]")
    expect(attempts).to_have_count(1)
    expect(attempts.first.locator("[data-attempt-error]")).to_contain_text("421")
    expect(page.locator("[data-delivery-section] [data-next-attempt]")).to_be_visible()

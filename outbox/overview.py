"""The dashboard's overview page (``/``), built from the same stats as GET /stats.

The numbers are :func:`outbox.stats.workspace_stats` (the /stats body, unchanged); the charts add
:func:`mail.selectors.hourly_received` and :func:`webhooks.selectors.webhook_health`. Charts are
drawn on the server as inline SVG: this module computes the geometry, the template only places
it, and the colours come from ``static/css/overview.css`` (the CSP forbids inline styles). Times
are UTC. It lives in outbox, above every app it summarises (see :mod:`outbox.stats`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from apikeys.dashboard import current_membership
from apikeys.models import Workspace
from inboxes import selectors as inbox_selectors
from mail import selectors as mail_selectors
from outbox import stats
from webhooks import selectors as webhook_selectors

HOURS = 72

# The mail chart's canvas (SVG user units; the SVG scales to its box).
CHART_W, CHART_H = 720, 200
PLOT_LEFT, PLOT_RIGHT, PLOT_TOP, PLOT_BOTTOM = 34, 712, 12, 164
# Half the width of the widest tick label ("Wed 25 Nov" at 12 units, bold), with a margin.
TICK_LABEL_HALF_W = 36

# The outbox chart: one row per place an outgoing message can be (deliveries, not hand-overs).
OUTBOX_ROW_H, OUTBOX_LABEL_W, OUTBOX_BAR_W = 30, 112, 160
# (key, label, source, field): ``source`` is the /stats block the count comes from.
OUTBOX_ROWS = (
    ("pending", "waiting", "outbox", "pending"),
    ("delivered", "delivered", "outbox_delivery", "delivered"),
    ("internal", "delivered here", "outbox_delivery", "internal"),
    ("queued", "queued", "outbox_delivery", "queued"),
    ("retrying", "retrying", "outbox_delivery", "retrying"),
    ("captured", "captured", "outbox_delivery", "captured"),
    ("failed", "failed", "outbox_delivery", "failed"),
    ("rejected", "rejected", "outbox", "rejected"),
    ("expired", "expired", "outbox", "expired"),
)

# The ring of the webhook success rate: a circle with pathLength 100, so the dash is the percent.
RING_R = 42

EVENT_WORDS = {
    "email.received": "Mail received",
    "email.labeled": "Labels applied",
    "email.updated": "Email changed",
    "email.deleted": "Email deleted",
    "mail.rejected": "Mail refused",
    "inbox.created": "Inbox created",
    "inbox.expired": "Inbox expired",
    "inbox.deleted": "Inbox deleted",
    "outbound.pending": "Waiting for approval",
    "outbound.sent": "Handed to delivery",
    "outbound.rejected": "Sending rejected",
    "outbound.failed": "Sending failed",
    "outbound.expired": "Approval expired",
    "webhook.test": "Webhook test",
}
EVENT_TONE = {
    "mail.rejected": "badge-warn",
    "outbound.pending": "badge-warn",
    "outbound.failed": "badge-danger",
    "outbound.rejected": "badge-danger",
    "inbox.expired": "badge-muted",
    "inbox.deleted": "badge-muted",
    "outbound.expired": "badge-muted",
    "email.deleted": "badge-muted",
    "email.received": "badge-ok",
}


@dataclass(frozen=True)
class Bar:
    x: float
    y: float
    width: float
    height: float
    count: int
    title: str
    hour: datetime


@dataclass(frozen=True)
class Tick:
    x: float
    label: str
    sublabel: str
    anchor: str = "middle"


@dataclass(frozen=True)
class GridLine:
    y: float
    label: str


def _nice_ceiling(value: int) -> int:
    """The smallest of 1, 2, 5, 10, 20, 50 … that is at least ``value`` (at least 1)."""
    step = 1
    while True:
        for factor in (1, 2, 5):
            if step * factor >= value:
                return step * factor
        step *= 10


def _tick_anchor(x: float) -> str:
    """How a tick's labels hang from it: centred, unless centring would push them past an edge
    of the canvas (the SVG clips what passes its viewBox), then ending or starting at the tick."""
    if x + TICK_LABEL_HALF_W > CHART_W:
        return "end"
    if x - TICK_LABEL_HALF_W < 0:
        return "start"
    return "middle"


def hour_title(hour: datetime, count: int) -> str:
    """A bar's hover text: ``3 emails, 14:00 UTC, Tue 5 Mar``."""
    noun = "email" if count == 1 else "emails"
    return f"{count} {noun}, {hour:%H}:00 UTC, {hour:%a} {hour.day} {hour:%b}"


def mail_chart(series: list[tuple[datetime, int]]) -> dict[str, Any]:
    """Bars, axis ticks and grid lines of the mail-per-hour chart, plus its text summary."""
    top = _nice_ceiling(max((count for _, count in series), default=0))
    slot = (PLOT_RIGHT - PLOT_LEFT) / len(series)
    height = PLOT_BOTTOM - PLOT_TOP
    bars, ticks = [], []
    for index, (hour, count) in enumerate(series):
        h = round(height * count / top, 2)
        x = round(PLOT_LEFT + index * slot, 2)
        bars.append(
            Bar(
                x=round(x + 1, 2),
                y=round(PLOT_BOTTOM - h, 2),
                width=round(slot - 2, 2),
                height=h,
                count=count,
                title=hour_title(hour, count),
                hour=hour,
            )
        )
        if hour.hour % 12 == 0:
            centre = round(x + slot / 2, 2)
            ticks.append(
                Tick(
                    x=centre,
                    label=f"{hour:%H}:00",
                    sublabel=f"{hour:%a} {hour.day} {hour:%b}" if hour.hour == 0 else "",
                    anchor=_tick_anchor(centre),
                )
            )
    values = [0, top // 2, top] if top % 2 == 0 else [0, top]
    grid = [GridLine(y=round(PLOT_BOTTOM - height * v / top, 2), label=str(v)) for v in values]
    total = sum(count for _, count in series)
    busiest = max(series, key=lambda item: item[1]) if total else None
    days: dict[str, int] = {}
    for hour, count in series:
        day = f"{hour:%a} {hour.day} {hour:%b}"
        days[day] = days.get(day, 0) + count
    return {
        "bars": bars,
        "ticks": ticks,
        "grid": grid,
        "total": total,
        "busiest": busiest,
        "days": days,
        "hours_with_mail": [(hour, count) for hour, count in reversed(series) if count],
        "width": CHART_W,
        "height": CHART_H,
        "plot_left": PLOT_LEFT,
        "plot_right": PLOT_RIGHT,
        "plot_bottom": PLOT_BOTTOM,
        "plot_top": PLOT_TOP,
        "plot_height": height,
        "first": series[0][0],
        "last": series[-1][0],
    }


def outbox_chart(numbers: dict[str, Any]) -> dict[str, Any]:
    """One horizontal bar per place outgoing mail can be, scaled to the largest: waiting for
    approval, what became of sent mail (delivered, retrying, captured, failed …), rejected and
    expired. A message handed to delivery counts as delivered only once the relay took it."""
    counts = {key: numbers[source].get(field, 0) for key, _, source, field in OUTBOX_ROWS}
    top = max(counts.values(), default=0) or 1
    rows = []
    for index, (status, label, _, _) in enumerate(OUTBOX_ROWS):
        count = counts[status]
        rows.append(
            {
                "status": status,
                "label": label,
                "count": count,
                "y": index * OUTBOX_ROW_H,
                "text_y": index * OUTBOX_ROW_H + 19,
                "width": round(OUTBOX_BAR_W * count / top, 2) if count else 0,
            }
        )
    return {
        "rows": rows,
        "total": sum(counts.values()),
        "height": len(rows) * OUTBOX_ROW_H,
        "label_w": OUTBOX_LABEL_W,
        "bar_w": OUTBOX_BAR_W,
        "count_x": OUTBOX_LABEL_W + OUTBOX_BAR_W + 8,
        "width": OUTBOX_LABEL_W + OUTBOX_BAR_W + 56,
    }


def webhook_ring(health: webhook_selectors.WebhookHealth) -> dict[str, Any]:
    """The success-rate ring: the percentage (rounded down, so 99.6 % never shows as 100 %)."""
    percent = None if health.rate is None else int(health.rate * 100)
    return {
        "health": health,
        "percent": percent,
        "radius": RING_R,
        "tone": (
            "ring-muted"
            if percent is None
            else "ring-ok"
            if percent >= 95
            else "ring-warn"
            if percent >= 80
            else "ring-danger"
        ),
    }


def _event_row(event: dict[str, Any], existing: set[str]) -> dict[str, Any]:
    data = event["data"] if isinstance(event["data"], dict) else {}
    inbox = data.get("inbox") if isinstance(data.get("inbox"), dict) else {}
    email = data.get("email") if isinstance(data.get("email"), dict) else {}
    outbound = data.get("outbound") if isinstance(data.get("outbound"), dict) else {}
    inbox_id = inbox.get("id") or event["inbox_id"] or ""
    email_id = email.get("id") or ""
    detail, link = "", ""
    if email.get("subject"):
        detail = email["subject"]
    elif outbound:
        detail = outbound.get("subject") or ""
    elif event["type"] == "mail.rejected":
        detail = f"from {data.get('from') or 'unknown sender'}: {data.get('reason') or ''}".strip()
    if email_id and email_id in existing:
        link, fallback = f"/emails/{email_id}/", "Open the email"
    elif outbound.get("id"):
        link, fallback = f"/approvals/{outbound['id']}/", "Open the message"
    elif inbox_id and inbox_id in existing:
        link, fallback = f"/inboxes/{inbox_id}/", "Open the inbox"
    else:
        fallback = ""
    return {
        "type": event["type"],
        "words": EVENT_WORDS.get(event["type"], event["type"]),
        "tone": EVENT_TONE.get(event["type"], ""),
        "detail": detail or fallback,
        "inbox_address": inbox.get("address") or "",
        "inbox_link": f"/inboxes/{inbox_id}/" if inbox_id and inbox_id in existing else "",
        "link": link,
        "created_at": event["created_at"],
    }


def recent_events(workspace: Workspace, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The /stats recent events in plain words, linked to what still exists."""
    inbox_ids, email_ids = set(), set()
    for event in events:
        data = event["data"] if isinstance(event["data"], dict) else {}
        if isinstance(data.get("inbox"), dict) and data["inbox"].get("id"):
            inbox_ids.add(data["inbox"]["id"])
        if event["inbox_id"]:
            inbox_ids.add(event["inbox_id"])
        if isinstance(data.get("email"), dict) and data["email"].get("id"):
            email_ids.add(data["email"]["id"])
    existing = stats.existing_ids(workspace, inbox_ids=inbox_ids, email_ids=email_ids)
    return [_event_row(event, existing) for event in events]


@login_required
def overview(request: HttpRequest) -> HttpResponse:
    """Numbers of GET /stats as cards, charts of mail, webhooks and the outbox, recent events.

    It is the page every sign-in lands on, so a user without a workspace gets the plain-words
    explanation with a 200 here (``member_required`` would answer 403)."""
    membership = current_membership(request)
    if membership is None:
        return render(request, "apikeys/no_workspace.html")
    workspace = membership.workspace
    numbers = stats.workspace_stats(workspace)
    context = {
        "stats": numbers,
        "mail": mail_chart(mail_selectors.hourly_received(workspace, hours=HOURS)),
        "outbox": outbox_chart(numbers),
        "ring": webhook_ring(webhook_selectors.webhook_health(workspace)),
        "events": recent_events(workspace, numbers["recent_events"]),
        "inbox": inbox_selectors.inbox_latest_active(workspace)
        if not numbers["emails"]["total"]
        else None,
        "hours": HOURS,
    }
    return render(request, "home.html", context)

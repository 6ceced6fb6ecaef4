"""Dashboard pages of the outbox: the approvals queue, one item, the decision history, and every
outgoing message with its delivery state and attempts.

Views stay thin: they call ``outbox.selectors`` and, for the no-JavaScript fallback of the
decision, ``outbox.services.decide`` — the same service the decision endpoint calls. In the
browser the decision goes through ``POST /api/v1/outbox/{id}/decision`` with the session
(``static/js/approvals.js``); coded errors become plain-words notices either way.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib import messages
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.dateparse import parse_datetime
from django.views.decorators.http import require_POST

from apikeys.audit import actor_of
from apikeys.dashboard import may, member_required
from apikeys.models import MANAGER_ROLES, Membership
from config.api.errors import ApiError, NotFound
from outbox import selectors, services
from outbox.forms import ApproveForm, RejectForm
from outbox.models import OutboxItem, Status

QUEUE_PAGE_SIZE = 50
HISTORY_PAGE_SIZE = 25
OUTGOING_PAGE_SIZE = 25
DELIVERY_FILTERS = [
    ("delivered", "Delivered"),
    ("internal", "Delivered here"),
    ("retrying", "Retrying"),
    ("queued", "Queued"),
    ("failed", "Failed"),
    ("captured", "Captured, not sent"),
    ("not_sent", "Not sent (waiting, rejected, expired)"),
]
HISTORY_STATUSES = [
    (Status.SENT, "Approved (handed to delivery)"),
    (Status.REJECTED, "Rejected"),
    (Status.FAILED, "Approved, delivery failed"),
    (Status.EXPIRED, "Expired undecided"),
]


def _membership(request: HttpRequest) -> Membership:
    return request.membership  # type: ignore[attr-defined]


@member_required()
def approvals(request: HttpRequest) -> HttpResponse:
    """Pending outgoing mail of the workspace, oldest (soonest to expire) first."""
    membership = _membership(request)
    queue = selectors.outbox_approval_queue(membership.workspace)
    page = Paginator(queue, QUEUE_PAGE_SIZE).get_page(request.GET.get("page"))
    context = {
        "page": page,
        "decides": may(request, "admin"),
        "approval_hours": settings.OUTBOX_APPROVAL_HOURS,
    }
    return render(request, "outbox/queue.html", context)


@member_required()
def approvals_history(request: HttpRequest) -> HttpResponse:
    """Items that needed approval and were decided or expired, most recent first."""
    membership = _membership(request)
    status = request.GET.get("status", "")
    if status not in dict(HISTORY_STATUSES):
        status = ""
    rows = selectors.outbox_approval_history(membership.workspace, status=status or None)
    page = Paginator(rows, HISTORY_PAGE_SIZE).get_page(request.GET.get("page"))
    for item in page:
        item.delivery_view = _delivery_view(item)  # type: ignore[attr-defined]
    context = {"page": page, "status": status, "statuses": HISTORY_STATUSES}
    return render(request, "outbox/history.html", context)


@member_required()
def outgoing(request: HttpRequest) -> HttpResponse:
    """Every outgoing message of the workspace, newest first, with its delivery state."""
    membership = _membership(request)
    state = request.GET.get("delivery", "")
    if state not in dict(DELIVERY_FILTERS):
        state = ""
    rows = selectors.outbox_outgoing(membership.workspace, delivery=state or None)
    page = Paginator(rows, OUTGOING_PAGE_SIZE).get_page(request.GET.get("page"))
    for item in page:
        item.delivery_view = _delivery_view(item)  # type: ignore[attr-defined]
    context = {"page": page, "delivery_filter": state, "filters": DELIVERY_FILTERS}
    return render(request, "outbox/outgoing.html", context)


def _delivery_view(item: OutboxItem) -> dict[str, Any]:
    """The API's ``delivery`` with times the template can format."""
    record = selectors.delivery_record(item)
    record["next_attempt_at"] = item.next_attempt_at if record["next_attempt_at"] else None
    record["delivered_at"] = item.delivered_at
    record["attempts"] = [
        {**attempt, "at": parse_datetime(attempt["at"]) if attempt.get("at") else None}
        for attempt in record["attempts"]
    ]
    return record


def _item_page(
    request: HttpRequest,
    item: OutboxItem,
    *,
    approve_form: ApproveForm | None = None,
    reject_form: RejectForm | None = None,
    status: int = 200,
) -> HttpResponse:
    pending = item.status == Status.PENDING
    decides = may(request, "admin")
    context: dict[str, Any] = {
        "item": item,
        "parts": selectors.outbox_parts(item),
        "delivery": _delivery_view(item),
        "pending": pending,
        "decides": decides,
        "expires_at": selectors.outbox_expires_at(item) if pending else None,
        "approve_form": approve_form or (ApproveForm.for_item(item) if pending else None),
        "reject_form": reject_form or (RejectForm() if pending else None),
    }
    return render(request, "outbox/item.html", context, status=status)


def _item_or_none(request: HttpRequest, item_id: str) -> OutboxItem | None:
    try:
        return selectors.outbox_get(_membership(request).workspace, item_id)
    except NotFound:
        return None


def _not_found(request: HttpRequest) -> HttpResponse:
    return render(request, "outbox/not_found.html", status=404)


@member_required()
def approval_detail(request: HttpRequest, item_id: str) -> HttpResponse:
    """The full message; owners and admins decide on a pending one here."""
    item = _item_or_none(request, item_id)
    if item is None:
        return _not_found(request)
    return _item_page(request, item)


@require_POST
@member_required(roles=MANAGER_ROLES)
def approval_decide(request: HttpRequest, item_id: str) -> HttpResponse:
    """The decision without JavaScript: the same ``services.decide`` as the API, CSRF-checked."""
    item = _item_or_none(request, item_id)
    if item is None:
        return _not_found(request)
    decision = request.POST.get("decision")
    if decision == "approve":
        form: ApproveForm | RejectForm = ApproveForm(request.POST)
    elif decision == "reject":
        form = RejectForm(request.POST)
    else:
        messages.error(request, "Choose Approve or Reject.")
        return redirect("approval_detail", item_id=item.pk)
    if not form.is_valid():
        forms: dict[str, Any] = {f"{decision}_form": form}
        return _item_page(request, item, status=400, **forms)
    edits = form.edits(item) if isinstance(form, ApproveForm) else {}
    try:
        item = services.decide(
            item=item,
            user=request.user,
            role=_membership(request).role,
            decision=decision,
            note=form.cleaned_data["note"],
            by=actor_of(request),
            **edits,
        )
    except ApiError as error:
        messages.error(request, error.message)
    else:
        if item.status == Status.REJECTED:
            messages.success(request, "Rejected. Nothing was sent.")
        else:
            recipients = ", ".join(item.to + item.cc)
            messages.success(request, f"Approved and handed to delivery for {recipients}.")
    return redirect("approval_detail", item_id=item.pk)

"""Dashboard pages of the webhooks app: endpoints, the signing secret shown once, the delivery
log with every attempt, replay and the test event.

Views are thin: forms validate with the API's serializers, then the services ``webhooks.api``
calls (``endpoint_create``, ``endpoint_update``, ``endpoint_delete``, ``send_test``, ``replay``)
do the work. Owners and admins manage endpoints (the API's ``admin`` scope); members see the
endpoints and their logs (``read``).
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from apikeys.audit import actor_of
from apikeys.dashboard import may, member_required
from apikeys.models import MANAGER_ROLES, Membership, Workspace
from config.api.errors import ApiError, NotFound
from webhooks import selectors, services
from webhooks.forms import EndpointForm
from webhooks.models import DeliveryStatus, Endpoint

# The plain secret waits here between the create POST and the page that shows it, once.
SECRET_SESSION_KEY = "webhooks.new_secret"


def _membership(request: HttpRequest) -> Membership:
    return request.membership  # type: ignore[attr-defined]


def _endpoint(workspace: Workspace, endpoint_id: str) -> Endpoint:
    try:
        return selectors.endpoint_get(workspace, endpoint_id)
    except NotFound as error:
        raise Http404(error.message) from error


def _form(workspace: Workspace, *args: Any, **kwargs: Any) -> EndpointForm:
    return EndpointForm(
        *args,
        inboxes=selectors.inbox_choices(workspace),
        labels=selectors.label_key_choices(workspace),
        **kwargs,
    )


def _issues_to_form(form: EndpointForm, error: ApiError) -> None:
    if error.issues:
        for issue in error.issues:
            form.add_issue(issue["path"], issue["message"])
    else:
        form.add_error(None, error.message)


@member_required()
def webhook_list(request: HttpRequest) -> HttpResponse:
    """Every endpoint with its events, state and the outcome of its newest delivery."""
    membership = _membership(request)
    context = {
        "endpoints": list(selectors.endpoint_list_with_last_delivery(membership.workspace)),
        "manages": may(request, "admin"),
    }
    return render(request, "webhooks/list.html", context)


@member_required(roles=MANAGER_ROLES)
def webhook_new(request: HttpRequest) -> HttpResponse:
    """Creates an endpoint; its secret is shown once, on the next page."""
    workspace = _membership(request).workspace
    if request.method != "POST":
        form = _form(workspace)
        return render(request, "webhooks/form.html", {"form": form, "endpoint": None})
    form = _form(workspace, request.POST)
    if form.is_valid():
        try:
            endpoint, secret = services.endpoint_create(
                workspace=workspace,
                by=actor_of(request),
                **selectors.endpoint_filters_check(workspace, form.validated),
            )
        except ApiError as error:
            _issues_to_form(form, error)
        else:
            request.session[SECRET_SESSION_KEY] = {"id": endpoint.pk, "secret": secret}
            messages.success(request, f"Endpoint {endpoint.url} created.")
            return redirect("webhook_detail", endpoint_id=endpoint.pk)
    return render(request, "webhooks/form.html", {"form": form, "endpoint": None})


@member_required()
def webhook_detail(request: HttpRequest, endpoint_id: str) -> HttpResponse:
    """The endpoint, the secret right after creation (never again), and the delivery log."""
    membership = _membership(request)
    endpoint = _endpoint(membership.workspace, endpoint_id)
    pending = request.session.get(SECRET_SESSION_KEY)
    secret = None
    if pending and pending.get("id") == endpoint.pk:
        secret = pending["secret"]
        del request.session[SECRET_SESSION_KEY]
    deliveries = selectors.recent_deliveries(endpoint)
    for delivery in deliveries:
        attempts = list(delivery.attempts.all())  # prefetched, oldest first
        delivery.attempt_list = attempts  # type: ignore[attr-defined]
        delivery.last_attempt = attempts[-1] if attempts else None  # type: ignore[attr-defined]
    inboxes = dict(selectors.inbox_choices(membership.workspace))
    context = {
        "endpoint": endpoint,
        "secret": secret,
        "deliveries": deliveries,
        "busy": any(
            d.status in (DeliveryStatus.PENDING, DeliveryStatus.RETRYING) for d in deliveries
        ),
        "inbox_addresses": [inboxes.get(i, i) for i in endpoint.inbox_ids],
        "manages": may(request, "admin"),
    }
    response = render(request, "webhooks/detail.html", context)
    if secret:
        response.headers["Cache-Control"] = "no-store"
    return response


@member_required(roles=MANAGER_ROLES)
def webhook_edit(request: HttpRequest, endpoint_id: str) -> HttpResponse:
    """Changes the URL, events, filters or state of an endpoint (the secret stays)."""
    workspace = _membership(request).workspace
    endpoint = _endpoint(workspace, endpoint_id)
    if request.method != "POST":
        initial = {
            "url": endpoint.url,
            "events": endpoint.events,
            "inbox_ids": endpoint.inbox_ids,
            "label_keys": endpoint.label_keys,
            "enabled": endpoint.enabled,
        }
        form = _form(workspace, initial=initial, creating=False)
        return render(request, "webhooks/form.html", {"form": form, "endpoint": endpoint})
    form = _form(workspace, request.POST, creating=False)
    if form.is_valid():
        try:
            services.endpoint_update(
                endpoint=endpoint,
                by=actor_of(request),
                **selectors.endpoint_filters_check(workspace, form.validated),
            )
        except ApiError as error:
            _issues_to_form(form, error)
        else:
            messages.success(request, "Endpoint saved.")
            return redirect("webhook_detail", endpoint_id=endpoint.pk)
    return render(request, "webhooks/form.html", {"form": form, "endpoint": endpoint})


@require_POST
@member_required(roles=MANAGER_ROLES)
def webhook_toggle(request: HttpRequest, endpoint_id: str) -> HttpResponse:
    """Enables a disabled endpoint or disables an enabled one."""
    endpoint = _endpoint(_membership(request).workspace, endpoint_id)
    endpoint = services.endpoint_update(
        endpoint=endpoint, by=actor_of(request), enabled=not endpoint.enabled
    )
    state = "enabled: it gets events again" if endpoint.enabled else "disabled: it gets no events"
    messages.success(request, f"Endpoint {state}.")
    if request.POST.get("next") == "list":
        return redirect("webhook_list")
    return redirect("webhook_detail", endpoint_id=endpoint.pk)


@require_POST
@member_required(roles=MANAGER_ROLES)
def webhook_delete(request: HttpRequest, endpoint_id: str) -> HttpResponse:
    """Deletes the endpoint with its delivery log."""
    endpoint = _endpoint(_membership(request).workspace, endpoint_id)
    url = endpoint.url
    services.endpoint_delete(endpoint=endpoint, by=actor_of(request))
    messages.success(request, f"Endpoint {url} deleted with its delivery log.")
    return redirect("webhook_list")


@require_POST
@member_required(roles=MANAGER_ROLES)
def webhook_test(request: HttpRequest, endpoint_id: str) -> HttpResponse:
    """Queues a ``webhook.test`` delivery; it shows up in the log."""
    endpoint = _endpoint(_membership(request).workspace, endpoint_id)
    services.send_test(endpoint=endpoint)
    note = "" if endpoint.enabled else " (the endpoint is disabled, but tests are still sent)"
    messages.success(request, f"Test event queued{note}. Its attempts appear below.")
    return redirect("webhook_detail", endpoint_id=endpoint.pk)


@require_POST
@member_required(roles=MANAGER_ROLES)
def webhook_replay(request: HttpRequest, endpoint_id: str, delivery_id: str) -> HttpResponse:
    """Sends a delivery again: same id and body, new signature, a new series of attempts."""
    endpoint = _endpoint(_membership(request).workspace, endpoint_id)
    try:
        delivery = services.replay(delivery=selectors.delivery_get(endpoint, delivery_id))
    except NotFound as error:
        raise Http404(error.message) from error
    messages.success(request, f"Delivery {delivery.pk} queued again. New attempts appear below.")
    return redirect("webhook_detail", endpoint_id=endpoint.pk)

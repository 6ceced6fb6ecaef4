"""Dashboard pages of the labels app: the list, the editor (rule as JSON, with an inline tester
that calls ``POST /api/v1/labels/test``) and deletion.

Views are thin: the form validates with the API's serializers, then one service of
``labels.services`` writes, exactly as ``labels.api`` does. Owners and admins edit (the API's
``admin`` scope); members see the labels and may use the tester (``read``).
"""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from apikeys.audit import actor_of
from apikeys.dashboard import forbidden_page, may, member_required
from apikeys.models import MANAGER_ROLES, Membership, Workspace
from config.api.errors import ApiError, NotFound
from labels import selectors, services
from labels.forms import RULE_EXAMPLE_JSON, LabelForm, rule_summary, rules_text
from labels.models import Label
from mail import selectors as mail_selectors


def _membership(request: HttpRequest) -> Membership:
    return request.membership  # type: ignore[attr-defined]


def _label(workspace: Workspace, key: str) -> Label:
    try:
        return selectors.label_get(workspace, key)
    except NotFound as error:
        raise Http404(error.message) from error


@member_required()
def label_list(request: HttpRequest) -> HttpResponse:
    """Every label of the workspace with its rule, question and how many emails carry it."""
    membership = _membership(request)
    labels = list(selectors.label_list_with_counts(membership.workspace))
    for label in labels:
        label.rule_summary = rule_summary(label.rules)  # type: ignore[attr-defined]
    context = {
        "labels": labels,
        "manages": may(request, "admin"),
        "classifier_enabled": membership.workspace.classifier_enabled,
    }
    return render(request, "labels/list.html", context)


def _editor(
    request: HttpRequest, form: LabelForm, label: Label | None, *, status: int = 200
) -> HttpResponse:
    membership = _membership(request)
    manages = may(request, "admin")
    if not manages:
        for field in form.fields.values():
            field.disabled = True
    context = {
        "form": form,
        "label": label,
        "manages": manages,
        "rule_example": RULE_EXAMPLE_JSON,
        "recent_emails": mail_selectors.recent_emails(membership.workspace),
        "classifier_enabled": membership.workspace.classifier_enabled,
    }
    return render(request, "labels/edit.html", context, status=status)


@member_required(roles=MANAGER_ROLES)
def label_new(request: HttpRequest) -> HttpResponse:
    """Creates a label through ``services.label_create``."""
    workspace = _membership(request).workspace
    if request.method != "POST":
        return _editor(request, LabelForm(creating=True), None)
    form = LabelForm(request.POST, creating=True)
    if form.is_valid():
        try:
            label = services.label_create(
                workspace=workspace, by=actor_of(request), **form.validated
            )
        except ApiError as error:
            form.add_error("key" if error.code == "label_exists" else None, error.message)
            for issue in error.issues or []:
                form.add_issue(issue["path"], issue["message"])
        else:
            messages.success(request, f"Label “{label.name}” ({label.key}) created.")
            return redirect("label_edit", key=label.key)
    return _editor(request, form, None)


@member_required()
def label_edit(request: HttpRequest, key: str) -> HttpResponse:
    """The editor of one label; read-only (with the tester) for members."""
    membership = _membership(request)
    label = _label(membership.workspace, key)
    initial = {
        "name": label.name,
        "color": label.color,
        "rules": rules_text(label.rules),
        "instructions": label.instructions,
        "threshold": label.threshold,
        "enabled": label.enabled,
    }
    if request.method != "POST":
        return _editor(request, LabelForm(initial=initial, creating=False), label)
    if not may(request, "admin"):
        return forbidden_page(
            request,
            f"Only owners and admins of {membership.workspace.name} can change labels. "
            f"Your role there is {membership.role}.",
        )
    form = LabelForm(request.POST, creating=False)
    if form.is_valid():
        try:
            services.label_update(label=label, by=actor_of(request), **form.validated)
        except ApiError as error:
            form.add_error(None, error.message)
            for issue in error.issues or []:
                form.add_issue(issue["path"], issue["message"])
        else:
            messages.success(request, f"Label “{label.name}” saved.")
            return redirect("label_edit", key=label.key)
    return _editor(request, form, label)


@require_POST
@member_required(roles=MANAGER_ROLES)
def label_delete(request: HttpRequest, key: str) -> HttpResponse:
    """Deletes the label; it disappears from every email."""
    label = _label(_membership(request).workspace, key)
    name = label.name
    services.label_delete(label=label, by=actor_of(request))
    messages.success(request, f"Label “{name}” deleted and removed from every email.")
    return redirect("label_list")

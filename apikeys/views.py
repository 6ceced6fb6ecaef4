"""Dashboard pages of the tenancy app: sign-in, password, workspace switcher and members.

Views stay thin: they validate a form, call one service of ``apikeys.services`` (the same the
API and the management commands use) and render; coded errors become flash notices.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse_lazy
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from apikeys import selectors, services
from apikeys.authentication import SESSION_WORKSPACE_KEY
from apikeys.dashboard import member_required
from apikeys.forms import (
    EmailAuthenticationForm,
    MemberAddForm,
    MemberRoleForm,
    WorkspaceSwitchForm,
)
from apikeys.models import Membership, Role
from config.api.errors import ApiError, NotFound, ValidationFailed

MANAGERS = (Role.OWNER, Role.ADMIN)

login = auth_views.LoginView.as_view(
    authentication_form=EmailAuthenticationForm, redirect_authenticated_user=True
)
logout = auth_views.LogoutView.as_view()
password_change = auth_views.PasswordChangeView.as_view(
    success_url=reverse_lazy("password_change_done")
)
password_change_done = auth_views.PasswordChangeDoneView.as_view()


@login_required
def home(request: HttpRequest) -> HttpResponse:
    """The landing page (the Overview replaces it); workspace and badge come from the context."""
    return render(request, "home.html")


@require_POST
@login_required
def workspace_switch(request: HttpRequest) -> HttpResponse:
    """Makes another of the user's workspaces the current one (kept in the session)."""
    form = WorkspaceSwitchForm(request.POST)
    membership = (
        selectors.membership_in(request.user, form.cleaned_data["workspace"])
        if form.is_valid()
        else None
    )
    if membership is None:
        messages.error(request, "You are not a member of that workspace.")
        return redirect("home")
    request.session[SESSION_WORKSPACE_KEY] = membership.workspace_id
    messages.success(request, f"Switched to {membership.workspace.name}.")
    # Back to the section the user was in: an object page of the old workspace would be a 404.
    target = (form.cleaned_data.get("next") or "/").split("?", 1)[0]
    section = target.strip("/").split("/", 1)[0]
    target = f"/{section}/" if section else "/"
    if not url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}):
        target = "/"
    return redirect(target)


def _members_page(
    request: HttpRequest, membership: Membership, add_form: MemberAddForm | None = None
) -> HttpResponse:
    manages = membership.role in MANAGERS
    is_owner = membership.role == Role.OWNER
    members = list(selectors.membership_list(membership.workspace))
    rows = [
        {
            "member": m,
            "is_self": m.pk == membership.pk,
            # Admins may not touch owners; only owners hand out the owner role.
            "editable": manages and (is_owner or m.role != Role.OWNER),
            "roles": [c for c in Role.choices if is_owner or c[0] != Role.OWNER],
        }
        for m in members
    ]
    context = {
        "rows": rows,
        "manages": manages,
        "add_form": add_form
        if add_form is not None
        else (MemberAddForm(can_grant_owner=is_owner) if manages else None),
    }
    return render(request, "apikeys/members.html", context)


@member_required()
def members(request: HttpRequest) -> HttpResponse:
    """The workspace's members and their roles; owners and admins also get the forms."""
    return _members_page(request, request.membership)  # type: ignore[attr-defined]


@require_POST
@member_required(roles=MANAGERS)
def member_add(request: HttpRequest) -> HttpResponse:
    actor: Membership = request.membership  # type: ignore[attr-defined]
    form = MemberAddForm(request.POST, can_grant_owner=actor.role == Role.OWNER)
    if form.is_valid():
        try:
            added = services.membership_add(
                actor=actor,
                email=form.cleaned_data["email"],
                role=form.cleaned_data["role"],
                password=form.cleaned_data["password"] or None,
            )
        except ValidationFailed as error:
            for issue in error.issues or []:
                form.add_error(
                    issue["path"] if issue["path"] in form.fields else None, issue["message"]
                )
        except ApiError as error:
            form.add_error(None, error.message)
        else:
            messages.success(request, f"Added {added.user.get_username()} as {added.role}.")
            return redirect("members")
    return _members_page(request, actor, add_form=form)


def _target(request: HttpRequest, membership_id: int) -> Membership:
    try:
        return selectors.membership_get(request.membership.workspace, membership_id)  # type: ignore[attr-defined]
    except NotFound as error:
        raise Http404(error.message) from error


@require_POST
@member_required(roles=MANAGERS)
def member_role(request: HttpRequest, membership_id: int) -> HttpResponse:
    target = _target(request, membership_id)
    form = MemberRoleForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Choose one of the roles owner, admin or member.")
        return redirect("members")
    try:
        services.membership_role_set(
            actor=request.membership,  # type: ignore[attr-defined]
            membership=target,
            role=form.cleaned_data["role"],
        )
    except ApiError as error:
        messages.error(request, error.message)
    else:
        messages.success(request, f"{target.user.get_username()} is now {target.role}.")
    return redirect("members")


@require_POST
@member_required(roles=MANAGERS)
def member_remove(request: HttpRequest, membership_id: int) -> HttpResponse:
    target = _target(request, membership_id)
    actor: Membership = request.membership  # type: ignore[attr-defined]
    try:
        services.membership_remove(actor=actor, membership=target)
    except ApiError as error:
        messages.error(request, error.message)
        return redirect("members")
    messages.success(request, f"Removed {target.user.get_username()} from {actor.workspace.name}.")
    if target.pk == actor.pk:
        request.session.pop(SESSION_WORKSPACE_KEY, None)
        return redirect("home")
    return redirect("members")

"""Dashboard pages of the tenancy app: sign-in, password, workspace switcher, members, API keys
and workspace settings.

Views stay thin: they validate a form, call one service of ``apikeys.services`` (the same the
API and the management commands use) and render; coded errors become flash notices.
"""

from __future__ import annotations

import json

from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse_lazy
from django.utils import timezone
from django.utils.cache import add_never_cache_headers
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from apikeys import selectors, services
from apikeys.authentication import SESSION_WORKSPACE_KEY
from apikeys.dashboard import add_api_error, member_required
from apikeys.forms import (
    EmailAuthenticationForm,
    KeyApprovalForm,
    KeyCreateForm,
    MemberAddForm,
    MemberRoleForm,
    WorkspaceSettingsForm,
    WorkspaceSwitchForm,
)
from apikeys.models import IMPLIED_SCOPES, ApiKey, Membership, Role, effective_scopes
from config.api.errors import ApiError, NotFound

MANAGERS = (Role.OWNER, Role.ADMIN)

login = auth_views.LoginView.as_view(
    authentication_form=EmailAuthenticationForm, redirect_authenticated_user=True
)
logout = auth_views.LogoutView.as_view()
password_change = auth_views.PasswordChangeView.as_view(
    success_url=reverse_lazy("password_change_done")
)
password_change_done = auth_views.PasswordChangeDoneView.as_view()


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
        except ApiError as error:
            add_api_error(form, error)
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


# --- API keys ------------------------------------------------------------------------------------
# GET/POST /keys need the admin scope, which a session has only for owners and admins
# (apikeys.principal.ROLE_SCOPES): the pages mirror that, members get the 403 page.

# The plain key of a key just created waits here for its one display, then is popped.
_CREATED_KEY = "apikeys.created_key"


def _key_rows(keys: list[ApiKey]) -> list[dict[str, object]]:
    now = timezone.now()
    return [
        {
            "key": key,
            "implied": [
                s
                for s in services.ALL_SCOPES
                if s in effective_scopes(key.scopes) - set(key.scopes)
            ],
            "expired": key.expires_at is not None and key.expires_at <= now,
        }
        for key in keys
    ]


def _keys_page(request: HttpRequest, form: KeyCreateForm | None = None) -> HttpResponse:
    workspace = request.membership.workspace  # type: ignore[attr-defined]
    context = {
        "rows": _key_rows(list(selectors.api_key_list(workspace).order_by("-created_at"))),
        "revoked": list(selectors.api_key_revoked_list(workspace)),
        "form": form if form is not None else KeyCreateForm(),
        # For keys.js, which shows what a ticked scope includes (one source: the model's table).
        "implied_scopes": json.dumps({s: sorted(v - {s}) for s, v in IMPLIED_SCOPES.items()}),
    }
    return render(request, "apikeys/keys.html", context)


@member_required(roles=MANAGERS)
def keys(request: HttpRequest) -> HttpResponse:
    """The workspace's API keys, the form to create one, revocations."""
    # A plain key that was never displayed (the redirect was not followed) is dropped, not kept.
    request.session.pop(_CREATED_KEY, None)
    return _keys_page(request)


@require_POST
@member_required(roles=MANAGERS)
def key_create(request: HttpRequest) -> HttpResponse:
    """POST /keys for a session: creates the key, then shows its plain key once."""
    form = KeyCreateForm(request.POST)
    if not form.is_valid():
        return _keys_page(request, form)
    membership: Membership = request.membership  # type: ignore[attr-defined]
    try:
        created = services.api_key_create(
            workspace=membership.workspace,
            name=form.cleaned_data["name"],
            kind=form.cleaned_data["kind"],
            scopes=form.cleaned_data["scopes"],
            expires_in_days=form.cleaned_data["expires_in_days"],
            require_approval=form.cleaned_data["require_approval"],
            created_by=request.user,
        )
    except ApiError as error:
        form.add_error(None, error.message)
        return _keys_page(request, form)
    # Post/redirect/get, so a reload never mints a second key; the plain key rides in the
    # session until its one display pops it (never in the URL, never in a stored message).
    request.session[_CREATED_KEY] = {"id": created.key.pk, "plain": created.plain}
    return redirect("key_created", key_id=created.key.pk)


def _key(request: HttpRequest, key_id: str) -> ApiKey:
    try:
        return selectors.api_key_get(request.membership.workspace, key_id)  # type: ignore[attr-defined]
    except NotFound as error:
        raise Http404(error.message) from error


@member_required(roles=MANAGERS)
def key_created(request: HttpRequest, key_id: str) -> HttpResponse:
    """The one display of a new key's plain key; afterwards the page says it is gone."""
    key = _key(request, key_id)
    pending = request.session.get(_CREATED_KEY)
    plain = None
    if isinstance(pending, dict) and pending.get("id") == key.pk:
        plain = request.session.pop(_CREATED_KEY)["plain"]
    context = {
        "row": _key_rows([key])[0],
        "plain": plain,
        "me_url": request.build_absolute_uri("/api/v1/me"),
    }
    response = render(request, "apikeys/keys_created.html", context)
    add_never_cache_headers(response)  # the back button must not bring the key back
    return response


@require_POST
@member_required(roles=MANAGERS)
def key_approval(request: HttpRequest, key_id: str) -> HttpResponse:
    """PATCH /keys/{id} for a session: turns approval of the key's mail on or off."""
    key = _key(request, key_id)
    form = KeyApprovalForm(request.POST)
    form.is_valid()
    wanted = bool(form.cleaned_data.get("require_approval"))
    try:
        services.api_key_update(key=key, require_approval=wanted)
    except ApiError as error:
        messages.error(request, error.message)
    else:
        messages.success(
            request,
            f"Mail sent with {key.name} now waits for approval."
            if wanted
            else f"Mail sent with {key.name} no longer waits for approval.",
        )
    return redirect("keys")


@require_POST
@member_required(roles=MANAGERS)
def key_revoke(request: HttpRequest, key_id: str) -> HttpResponse:
    """DELETE /keys/{id} for a session: revokes the key at once."""
    key = _key(request, key_id)
    try:
        services.api_key_revoke(key=key)
    except ApiError as error:
        messages.error(request, error.message)
    else:
        messages.success(request, f"Revoked {key.name}. Requests with it are now refused.")
    return redirect("keys")


# --- workspace settings ---------------------------------------------------------------------------


def _settings_page(request: HttpRequest, form: WorkspaceSettingsForm | None = None) -> HttpResponse:
    # The dashboard chrome sits above the apps: a local import keeps apikeys free of inboxes.
    from inboxes.selectors import inbox_list

    membership: Membership = request.membership  # type: ignore[attr-defined]
    workspace = membership.workspace
    manages = membership.role in MANAGERS
    if form is None and manages:
        form = WorkspaceSettingsForm(
            initial={
                "name": workspace.name,
                "require_approval": workspace.require_approval,
                "classifier_enabled": workspace.classifier_enabled,
                "allow_permanent_inboxes": workspace.allow_permanent_inboxes,
            }
        )
    context = {
        "workspace": workspace,
        "manages": manages,
        "form": form if manages else None,
        "inbox_count": inbox_list(workspace, include_expired=True).count(),
        "member_count": selectors.membership_list(workspace).count(),
    }
    return render(request, "apikeys/settings.html", context)


@member_required()
def workspace_settings(request: HttpRequest) -> HttpResponse:
    """The workspace's settings; owners and admins edit them, members read them."""
    return _settings_page(request)


@require_POST
@member_required(roles=MANAGERS)
def workspace_settings_update(request: HttpRequest) -> HttpResponse:
    """Saves the settings form through ``services.workspace_update``; the API sees it at once."""
    form = WorkspaceSettingsForm(request.POST)
    if form.is_valid():
        try:
            services.workspace_update(actor=request.membership, **form.cleaned_data)  # type: ignore[attr-defined]
        except ApiError as error:
            add_api_error(form, error)
        else:
            messages.success(request, "Settings saved. They apply to the API at once.")
            return redirect("workspace_settings")
    return _settings_page(request, form)

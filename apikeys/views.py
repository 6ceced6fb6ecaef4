"""Dashboard pages of the tenancy app: sign-in, password, workspace switcher, members and
invitations, API keys, workspace settings and the audit log.

Views stay thin: they validate a form, call one service of ``apikeys.services`` (the same the
API and the management commands use) and render; coded errors become flash notices.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import login as auth_login
from django.contrib.auth import update_session_auth_hash
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.db import transaction
from django.db.models import Q
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import redirect, render
from django.urls import reverse, reverse_lazy
from django.utils import timezone
from django.utils.cache import add_never_cache_headers
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods, require_POST

from apikeys import audit, selectors, services
from apikeys.audit import actor_of
from apikeys.dashboard import add_api_error, may, member_required
from apikeys.exceptions import AccountExists, InvitationNotValid
from apikeys.forms import (
    EmailAuthenticationForm,
    InvitationPasswordForm,
    KeyApprovalForm,
    KeyCreateForm,
    MemberInviteForm,
    MemberRoleForm,
    WorkspaceDeleteForm,
    WorkspaceSettingsForm,
    WorkspaceSwitchForm,
)
from apikeys.gate import SESSION_WORKSPACE_KEY
from apikeys.models import (
    IMPLIED_SCOPES,
    MANAGER_ROLES,
    ApiKey,
    Membership,
    Role,
    effective_scopes,
    may_delete_workspace,
    may_manage,
)
from apikeys.signin import client_address
from config.api.errors import ApiError, NotFound
from config.api.pagination import paginate

MODEL_BACKEND = "django.contrib.auth.backends.ModelBackend"


class LoginView(auth_views.LoginView):
    """Django's sign-in page; every sign-in, and every refused one, is written to the audit
    log with the client address (``apikeys.audit``)."""

    authentication_form = EmailAuthenticationForm
    redirect_authenticated_user = True

    def form_valid(self, form: Any) -> HttpResponse:
        with transaction.atomic():
            response = super().form_valid(form)
            audit.sign_in_succeeded(user=form.get_user(), ip=client_address(self.request))
        return response

    def form_invalid(self, form: Any) -> HttpResponse:
        if any(e.code == "invalid_login" for e in form.errors.as_data().get("__all__", [])):
            name = form.cleaned_data.get("username") or ""
            audit.sign_in_failed(
                user=selectors.user_by_name(name) if name else None,
                ip=client_address(self.request),
            )
        return super().form_invalid(form)


class PasswordChangeView(auth_views.PasswordChangeView):
    """Django's password change page, saving through ``services.user_set_password`` (audited)."""

    success_url = reverse_lazy("password_change_done")

    def form_valid(self, form: Any) -> HttpResponse:
        services.user_set_password(
            user=form.user, password=form.cleaned_data["new_password1"], by=actor_of(self.request)
        )
        update_session_auth_hash(self.request, form.user)
        return HttpResponseRedirect(self.get_success_url())


login = LoginView.as_view()
logout = auth_views.LogoutView.as_view()
password_change = PasswordChangeView.as_view()
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


# The link of an invitation just made waits here for its one display, then is popped.
_CREATED_INVITATION = "apikeys.created_invitation"


def _members_page(
    request: HttpRequest, membership: Membership, add_form: MemberInviteForm | None = None
) -> HttpResponse:
    manages = may(request, "admin")
    members = list(selectors.membership_list(membership.workspace))
    rows = [
        {
            "member": m,
            "is_self": m.pk == membership.pk,
            "editable": may_manage(membership.role, m.role),
            "roles": [c for c in Role.choices if may_manage(membership.role, c[0])],
        }
        for m in members
    ]
    invitations = (
        [
            {"invitation": i, "revocable": may_manage(membership.role, i.role)}
            for i in selectors.invitation_list_pending(membership.workspace)
        ]
        if manages
        else []
    )
    created = request.session.pop(_CREATED_INVITATION, None)
    context = {
        "rows": rows,
        "manages": manages,
        "invitations": invitations,
        "created": created if isinstance(created, dict) else None,
        "ttl_hours": settings.INVITATION_TTL_HOURS,
        "add_form": add_form
        if add_form is not None
        else (
            MemberInviteForm(can_grant_owner=may_manage(membership.role, Role.OWNER))
            if manages
            else None
        ),
    }
    response = render(request, "apikeys/members.html", context)
    if created:
        add_never_cache_headers(response)  # the back button must not bring the link back
    return response


@member_required()
def members(request: HttpRequest) -> HttpResponse:
    """The workspace's members and their roles; owners and admins also get the forms and the
    pending invitations."""
    return _members_page(request, request.membership)  # type: ignore[attr-defined]


@require_POST
@member_required(roles=MANAGER_ROLES)
def member_add(request: HttpRequest) -> HttpResponse:
    """Invites a person: the link is shown once to the inviter and mailed when a relay is
    configured. Nobody's password is chosen here."""
    actor: Membership = request.membership  # type: ignore[attr-defined]
    form = MemberInviteForm(request.POST, can_grant_owner=may_manage(actor.role, Role.OWNER))
    if form.is_valid():
        try:
            created = services.invitation_create(
                actor=actor,
                email=form.cleaned_data["email"],
                role=form.cleaned_data["role"],
                by=actor_of(request),
            )
        except ApiError as error:
            add_api_error(form, error)
        else:
            invitation = created.invitation
            link = request.build_absolute_uri(reverse("invitation", args=[created.plain]))
            not_mailed = services.invitation_mail(invitation=invitation, link=link)
            # Post/redirect/get; the link rides in the session until its one display pops it.
            request.session[_CREATED_INVITATION] = {
                "id": invitation.pk,
                "email": invitation.email,
                "role": invitation.role,
                "link": link,
                "mailed": not_mailed is None,
                "not_mailed": not_mailed or "",
            }
            messages.success(request, f"Invited {invitation.email} as {invitation.role}.")
            return redirect("members")
    return _members_page(request, actor, add_form=form)


@require_POST
@member_required(roles=MANAGER_ROLES)
def invitation_revoke(request: HttpRequest, invitation_id: int) -> HttpResponse:
    """Withdraws a pending invitation; its link stops working at once."""
    actor: Membership = request.membership  # type: ignore[attr-defined]
    try:
        invitation = selectors.invitation_get(actor.workspace, invitation_id)
    except NotFound as error:
        raise Http404(error.message) from error
    try:
        services.invitation_revoke(actor=actor, invitation=invitation, by=actor_of(request))
    except ApiError as error:
        messages.error(request, error.message)
    else:
        messages.success(request, f"Withdrew the invitation of {invitation.email}.")
    return redirect("members")


def _invitation_page(
    request: HttpRequest, context: dict[str, object], status: int = 200
) -> HttpResponse:
    return render(request, "apikeys/invitation.html", context, status=status)


def _joined(request: HttpRequest, membership: Membership) -> HttpResponse:
    request.session[SESSION_WORKSPACE_KEY] = membership.workspace_id
    messages.success(request, f"Welcome to {membership.workspace.name}.")
    return redirect("home")


@never_cache  # the page carries the link's secret in its URL
@require_http_methods(["GET", "POST"])
def invitation(request: HttpRequest, token: str) -> HttpResponse:
    """The link of an invitation: a new person chooses their password; someone with an account
    signs in with it and then accepts; anybody else is refused in plain words."""
    try:
        found = selectors.invitation_for_plain(token)
    except InvitationNotValid as error:
        return _invitation_page(request, {"problem": error.message}, status=410)
    problem = selectors.invitation_problem(found)
    if problem is not None:
        return _invitation_page(request, {"problem": problem}, status=410)
    context: dict[str, object] = {"invitation": found, "path": request.path}
    if request.user.is_authenticated:
        if services.user_email(request.user) != found.email:
            return _invitation_page(request, {**context, "wrong_account": True}, status=403)
        if request.method == "POST":
            try:
                membership = services.invitation_accept(
                    plain=token, user=request.user, ip=client_address(request)
                )
            except ApiError as error:
                return _invitation_page(request, {"problem": error.message}, status=error.status)
            return _joined(request, membership)
        return _invitation_page(request, {**context, "accept": True})
    if services.account_exists(found.email):
        login_url = f"{reverse('login')}?{urlencode({'next': request.path})}"
        return _invitation_page(request, {**context, "sign_in": login_url})
    form = InvitationPasswordForm(request.POST if request.method == "POST" else None)
    if request.method == "POST" and form.is_valid():
        try:
            membership = services.invitation_accept_new(
                plain=token, password=form.cleaned_data["password"], ip=client_address(request)
            )
        except AccountExists:  # created meanwhile: the page now asks to sign in
            return redirect(request.path)
        except ApiError as error:
            add_api_error(form, error)
        else:
            auth_login(request, membership.user, backend=MODEL_BACKEND)
            return _joined(request, membership)
    return _invitation_page(request, {**context, "form": form})


def _target(request: HttpRequest, membership_id: int) -> Membership:
    try:
        return selectors.membership_get(request.membership.workspace, membership_id)  # type: ignore[attr-defined]
    except NotFound as error:
        raise Http404(error.message) from error


@require_POST
@member_required(roles=MANAGER_ROLES)
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
            by=actor_of(request),
        )
    except ApiError as error:
        messages.error(request, error.message)
    else:
        messages.success(request, f"{target.user.get_username()} is now {target.role}.")
    return redirect("members")


@require_POST
@member_required(roles=MANAGER_ROLES)
def member_remove(request: HttpRequest, membership_id: int) -> HttpResponse:
    target = _target(request, membership_id)
    actor: Membership = request.membership  # type: ignore[attr-defined]
    try:
        services.membership_remove(actor=actor, membership=target, by=actor_of(request))
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
# (apikeys.models.ROLE_SCOPES): the pages mirror that, members get the 403 page.

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


@member_required(roles=MANAGER_ROLES)
def keys(request: HttpRequest) -> HttpResponse:
    """The workspace's API keys, the form to create one, revocations."""
    # A plain key that was never displayed (the redirect was not followed) is dropped, not kept.
    request.session.pop(_CREATED_KEY, None)
    return _keys_page(request)


@require_POST
@member_required(roles=MANAGER_ROLES)
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
            by=actor_of(request),
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


@member_required(roles=MANAGER_ROLES)
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
@member_required(roles=MANAGER_ROLES)
def key_approval(request: HttpRequest, key_id: str) -> HttpResponse:
    """PATCH /keys/{id} for a session: turns approval of the key's mail on or off."""
    key = _key(request, key_id)
    form = KeyApprovalForm(request.POST)
    form.is_valid()
    wanted = bool(form.cleaned_data.get("require_approval"))
    try:
        services.api_key_update(key=key, require_approval=wanted, by=actor_of(request))
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
@member_required(roles=MANAGER_ROLES)
def key_revoke(request: HttpRequest, key_id: str) -> HttpResponse:
    """DELETE /keys/{id} for a session: revokes the key at once."""
    key = _key(request, key_id)
    try:
        services.api_key_revoke(key=key, by=actor_of(request))
    except ApiError as error:
        messages.error(request, error.message)
    else:
        messages.success(request, f"Revoked {key.name}. Requests with it are now refused.")
    return redirect("keys")


# --- workspace settings ---------------------------------------------------------------------------


def _settings_page(request: HttpRequest, form: WorkspaceSettingsForm | None = None) -> HttpResponse:
    membership: Membership = request.membership  # type: ignore[attr-defined]
    workspace = membership.workspace
    manages = may(request, "admin")
    if form is None and manages:
        form = WorkspaceSettingsForm(
            initial={
                "name": workspace.name,
                "require_approval": workspace.require_approval,
                "classifier_enabled": workspace.classifier_enabled,
                "allow_permanent_inboxes": workspace.allow_permanent_inboxes,
                "expired_inbox_grace_hours": workspace.expired_inbox_grace_hours,
                "email_retention_days": workspace.email_retention_days,
                "audit_retention_days": workspace.audit_retention_days,
            }
        )
    context = {
        "workspace": workspace,
        "manages": manages,
        "form": form if manages else None,
        # Through the relation inboxes' model declares: apikeys sits below inboxes.
        # What max_inboxes counts: the inboxes that have not expired.
        "inbox_count": workspace.inboxes.filter(
            Q(expires_at__isnull=True) | Q(expires_at__gt=timezone.now())
        ).count(),
        "deletes": may_delete_workspace(membership.role),
        "member_count": selectors.membership_list(workspace).count(),
    }
    return render(request, "apikeys/settings.html", context)


@member_required()
def workspace_settings(request: HttpRequest) -> HttpResponse:
    """The workspace's settings; owners and admins edit them, members read them."""
    return _settings_page(request)


@require_POST
@member_required(roles=MANAGER_ROLES)
def workspace_settings_update(request: HttpRequest) -> HttpResponse:
    """Saves the settings form through ``services.workspace_update``; the API sees it at once."""
    form = WorkspaceSettingsForm(request.POST)
    if form.is_valid():
        try:
            services.workspace_update(
                actor=request.membership,  # type: ignore[attr-defined]
                by=actor_of(request),
                **form.cleaned_data,
            )
        except ApiError as error:
            add_api_error(form, error)
        else:
            messages.success(request, "Settings saved. They apply to the API at once.")
            return redirect("workspace_settings")
    return _settings_page(request, form)


# --- deleting the workspace -----------------------------------------------------------------------


@member_required(roles=(Role.OWNER,))
def workspace_delete(request: HttpRequest) -> HttpResponse:
    """Deletes the workspace with everything in it, once its name is typed again (owners)."""
    membership: Membership = request.membership  # type: ignore[attr-defined]
    form = WorkspaceDeleteForm(request.POST if request.method == "POST" else None)
    if request.method == "POST" and form.is_valid():
        name = membership.workspace.name
        try:
            services.workspace_delete(actor=membership, confirm=form.cleaned_data["confirm"])
        except ApiError as error:
            add_api_error(form, error)
        else:
            request.session.pop(SESSION_WORKSPACE_KEY, None)
            messages.success(request, f"Deleted {name} with everything in it.")
            return redirect("/")
    context = {"workspace": membership.workspace, "form": form}
    return render(request, "apikeys/workspace_delete.html", context)


# --- audit log ------------------------------------------------------------------------------------

_AUDIT_PAGE = 50


def _shown(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _change_rows(changes: dict) -> list[dict[str, object]]:
    """An entry's changes as the page shows them: each value as JSON, strings as they are."""
    return [
        {
            "field": field,
            "before": _shown(change["before"]) if "before" in change else None,
            "after": _shown(change["after"]) if "after" in change else None,
        }
        for field, change in changes.items()
    ]


@member_required(roles=MANAGER_ROLES)
def audit_log(request: HttpRequest) -> HttpResponse:
    """The workspace's audit log, newest first, filtered by action and actor like GET /audit
    (``selectors.audit_list``, the same paging)."""
    workspace = request.membership.workspace  # type: ignore[attr-defined]
    action = request.GET.get("action", "").strip()[:64]
    actor = request.GET.get("actor", "").strip()[:64]
    rows = selectors.audit_list(workspace, actor=actor or None, action=action or None)
    try:
        entries, next_cursor = paginate(
            rows, limit=_AUDIT_PAGE, cursor=request.GET.get("cursor") or None
        )
    except ApiError:  # a cursor edited by hand: the first page
        entries, next_cursor = paginate(rows, limit=_AUDIT_PAGE, cursor=None)
    more = (
        "?"
        + urlencode(
            {k: v for k, v in (("action", action), ("actor", actor)) if v} | {"cursor": next_cursor}
        )
        if next_cursor
        else ""
    )
    context = {
        "entries": [(entry, _change_rows(entry.changes)) for entry in entries],
        "action": action,
        "actor": actor,
        "actions": sorted(audit.ACTIONS),
        "next_url": more,
        "retention_days": workspace.audit_retention_days,
    }
    return render(request, "apikeys/audit.html", context)

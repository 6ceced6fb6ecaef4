"""The dashboard's access rule: ``@member_required`` resolves the signed-in user's workspace.

Every dashboard page of every app is wrapped in it::

    @member_required()                          # any member of the current workspace
    @member_required(roles=MANAGER_ROLES)       # 403 page for everyone else

It sends anonymous visitors to ``/login/``, answers a plain-words page to a user who belongs to
no workspace, and sets ``request.membership`` (with ``.workspace`` and ``.role``) for the view.
Inside a page, ``may(request, scope)`` asks what the member's role may do (``models.role_may``,
the same API scopes a dashboard session carries) and ``refuse`` answers the 403 page.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import wraps
from typing import Any

from django.contrib.auth.views import redirect_to_login
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from apikeys import selectors
from apikeys.gate import SESSION_WORKSPACE_KEY
from apikeys.models import Membership, role_may

View = Callable[..., HttpResponse]


def current_membership(request: HttpRequest) -> Membership | None:
    """The signed-in user's membership in the session's workspace (else their oldest one)."""
    cached = getattr(request, "membership", None)
    if cached is not None:
        return cached
    if not request.user.is_authenticated:
        return None
    membership = selectors.membership_for(request.user, request.session.get(SESSION_WORKSPACE_KEY))
    request.membership = membership  # type: ignore[attr-defined]
    return membership


def forbidden_page(request: HttpRequest, message: str) -> HttpResponse:
    """The plain-words 403 page."""
    return render(request, "apikeys/forbidden.html", {"message": message}, status=403)


def may(request: HttpRequest, scope: str) -> bool:
    """Whether the signed-in member's role carries this API scope."""
    return role_may(request.membership.role, scope)  # type: ignore[attr-defined]


def refuse(request: HttpRequest, what: str) -> HttpResponse:
    """The 403 page for a member whose role may not do ``what``."""
    role = request.membership.role  # type: ignore[attr-defined]
    return forbidden_page(request, f"Your role ({role}) may not {what} in this workspace.")


def member_required(roles: Iterable[str] | None = None) -> Callable[[View], View]:
    """Login and a workspace required; with ``roles``, only those roles may pass."""
    allowed = frozenset(roles) if roles is not None else None

    def decorator(view: View) -> View:
        @wraps(view)
        def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            if not request.user.is_authenticated:
                return redirect_to_login(request.get_full_path())
            membership = current_membership(request)
            if membership is None:
                return render(request, "apikeys/no_workspace.html", status=403)
            if allowed is not None and membership.role not in allowed:
                names = " and ".join(sorted(f"{r}s" for r in allowed))
                return forbidden_page(
                    request,
                    f"Only {names} of {membership.workspace.name} can do this. "
                    f"Your role there is {membership.role}.",
                )
            return view(request, *args, **kwargs)

        return wrapper

    return decorator


def add_api_error(form: Any, error: Any) -> None:
    """Shows a service's coded error on ``form``: each issue on the field its path names (else
    on the form), or the error's message when it has no issues."""
    issues = getattr(error, "issues", None) or []
    if not issues:
        form.add_error(None, error.message)
    for issue in issues:
        form.add_error(issue["path"] if issue["path"] in form.fields else None, issue["message"])

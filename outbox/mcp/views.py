"""The dashboard's "Connect an agent" page (``/connect/``): this instance's ``/mcp`` URL, a button
that creates an ``agent`` key for it (``apikeys.services.api_key_create``, the service the keys
page uses; approval on by default), and the configuration of the common MCP clients with that key
filled in (``outbox.mcp.clients``). It lives with the MCP server in ``outbox.mcp``.

The plain key is shown once: it rides in the session from the POST to the page's next display
(post/redirect/get, so a reload never mints a second key), as on the keys page.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.cache import add_never_cache_headers
from django.views.decorators.http import require_POST

from apikeys import services as key_services
from apikeys.audit import actor_of
from apikeys.dashboard import may, member_required, refuse
from apikeys.models import KeyKind
from config.api.errors import ApiError
from outbox.forms import AgentKeyForm
from outbox.mcp.clients import client_configs

_CREATED = "connect_key"  # session: {"id", "plain"} until the page shows it
PLACEHOLDER = "pgh_YOUR_KEY"


def _page(
    request: HttpRequest, form: AgentKeyForm | None = None, status: int = 200
) -> HttpResponse:
    url = request.build_absolute_uri("/mcp")
    created = request.session.pop(_CREATED, None)
    plain = created["plain"] if isinstance(created, dict) else None
    context = {
        "mcp_url": url,
        "plain": plain,
        "created_id": created["id"] if plain else None,
        "configs": client_configs(url, plain or PLACEHOLDER),
        "stdio": f"python manage.py mcp --key {plain or PLACEHOLDER}",
        "form": form or AgentKeyForm(),
        "may_create": may(request, "admin"),
    }
    response = render(request, "outbox/connect.html", context, status=status)
    add_never_cache_headers(response)  # the back button must not bring a key back
    return response


@member_required()
def connect(request: HttpRequest) -> HttpResponse:
    """GET /connect/: the page (with the new key once, right after it was created)."""
    return _page(request)


@require_POST
@member_required()
def connect_key(request: HttpRequest) -> HttpResponse:
    """POST /connect/key/: an agent key for the MCP server (owners and admins, as on /keys/)."""
    if not may(request, "admin"):
        return refuse(request, "create API keys")
    form = AgentKeyForm(request.POST)
    if not form.is_valid():
        return _page(request, form, status=400)
    try:
        created = key_services.api_key_create(
            workspace=request.membership.workspace,  # type: ignore[attr-defined]
            name=form.cleaned_data["name"],
            kind=KeyKind.AGENT,
            scopes=form.cleaned_data["scopes"],
            require_approval=form.cleaned_data["require_approval"],
            created_by=request.user,
            by=actor_of(request),
        )
    except ApiError as error:
        form.add_error(None, error.message)
        return _page(request, form, status=400)
    request.session[_CREATED] = {"id": created.key.pk, "plain": created.plain}
    return redirect("connect")

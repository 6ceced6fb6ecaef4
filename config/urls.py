"""URL map: the REST API under /api/v1, the schema and docs, health, admin and dashboard."""

from __future__ import annotations

from importlib import import_module
from typing import Any

from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.urls import include, path

from config.health import healthz
from outbox.overview import overview


def _routes(*modules: str) -> list[Any]:
    """The routes of these URL modules as one flat list, in order (by name, as ``include``
    takes them). An ``include`` per app made every request that missed an app's routes raise
    and record a "not found" of its own: half of the URL resolution's ~30 us (issue 32)."""
    return [route for name in modules for route in import_module(name).urlpatterns]


def _spectacular(view: str, **initkwargs: Any) -> Any:
    """drf-spectacular's view ``view``, imported at its first request: imported with the
    URLconf, its generator cost a process about 140 ms of CPU when it first loaded the URLs
    (issue 32; docs/benchmark-methods.md), for two pages."""
    built: list[Any] = []

    def serve(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not built:
            views = import_module("drf_spectacular.views")
            built.append(getattr(views, view).as_view(**initkwargs))
        return built[0](request, *args, **kwargs)

    serve.csrf_exempt = True  # type: ignore[attr-defined]  # as DRF's as_view() marks it
    return serve


api_v1 = _routes(
    "apikeys.urls", "inboxes.urls", "mail.urls", "labels.urls", "webhooks.urls", "outbox.urls"
)

urlpatterns = [
    path("healthz", healthz),
    path("api/v1/", include(api_v1)),
    path("api/openapi.json", _spectacular("SpectacularJSONAPIView"), name="schema"),
    # Every asset from this instance: templates/api/redoc.html (issue 25).
    path(
        "api/docs",
        _spectacular("SpectacularRedocView", url_name="schema", template_name="api/redoc.html"),
        name="docs",
    ),
    path("admin/", admin.site.urls),
    path("", overview, name="home"),
    # Dashboard pages: each app owns its dashboard_urls (flat names, prefixed by area).
    path("", include("apikeys.dashboard_urls")),
    path("", include("inboxes.dashboard_urls")),
    path("", include("mail.dashboard_urls")),
    path("", include("outbox.dashboard_urls")),
    path("", include("labels.dashboard_urls")),
    path("", include("webhooks.dashboard_urls")),
]

handler404 = "config.api.errors.handler404"
handler500 = "config.api.errors.handler500"

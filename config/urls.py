"""URL map: the REST API under /api/v1, the schema and docs, health, admin and dashboard."""

from __future__ import annotations

from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularJSONAPIView, SpectacularRedocView

from config.health import healthz
from outbox.overview import overview

api_v1 = [
    path("", include("apikeys.urls")),
    path("", include("inboxes.urls")),
    path("", include("mail.urls")),
    path("", include("labels.urls")),
    path("", include("webhooks.urls")),
    path("", include("outbox.urls")),
]

urlpatterns = [
    path("healthz", healthz),
    path("api/v1/", include(api_v1)),
    path("api/openapi.json", SpectacularJSONAPIView.as_view(), name="schema"),
    # Every asset from this instance: templates/api/redoc.html (issue 25).
    path(
        "api/docs",
        SpectacularRedocView.as_view(url_name="schema", template_name="api/redoc.html"),
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

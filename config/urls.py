"""URL map: the REST API under /api/v1, the schema and docs, health, admin and dashboard."""

from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from drf_spectacular.views import SpectacularJSONAPIView, SpectacularRedocView

from apikeys.views import home
from config.health import healthz

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
    path("api/docs", SpectacularRedocView.as_view(url_name="schema"), name="docs"),
    path("admin/", admin.site.urls),
    path("login/", auth_views.LoginView.as_view(redirect_authenticated_user=True), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("", home, name="home"),
]

handler404 = "config.api.errors.handler404"
handler500 = "config.api.errors.handler500"

"""The API's key routes; importing them registers the OpenAPI descriptions of the two ways in
(``apikeys.schema``), so the schema has them wherever the URL map is loaded and processes that
serve no HTTP (smtpd, Celery) never import drf-spectacular's test-client dependencies."""

from django.urls import path

from apikeys import api, schema  # noqa: F401  (schema: registers the OpenAPI auth extensions)

urlpatterns = [
    path("keys", api.KeysApi.as_view()),
    path("keys/<str:key_id>", api.KeyApi.as_view()),
    path("me", api.MeApi.as_view()),
    path("audit", api.AuditApi.as_view()),
]

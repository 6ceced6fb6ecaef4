"""Dashboard pages of the webhooks app."""

from __future__ import annotations

from django.urls import path

from webhooks import views

urlpatterns = [
    path("webhooks/", views.webhook_list, name="webhook_list"),
    path("webhooks/new/", views.webhook_new, name="webhook_new"),
    path("webhooks/<str:endpoint_id>/", views.webhook_detail, name="webhook_detail"),
    path("webhooks/<str:endpoint_id>/edit/", views.webhook_edit, name="webhook_edit"),
    path("webhooks/<str:endpoint_id>/toggle/", views.webhook_toggle, name="webhook_toggle"),
    path("webhooks/<str:endpoint_id>/delete/", views.webhook_delete, name="webhook_delete"),
    path("webhooks/<str:endpoint_id>/test/", views.webhook_test, name="webhook_test"),
    path(
        "webhooks/<str:endpoint_id>/deliveries/<str:delivery_id>/replay/",
        views.webhook_replay,
        name="webhook_replay",
    ),
]

"""Dashboard pages of the inboxes app (the inbox page with its mail is in mail.dashboard_urls)."""

from __future__ import annotations

from django.urls import path

from inboxes import views

urlpatterns = [
    path("inboxes/", views.inbox_list, name="inbox_list"),
    path("inboxes/new/", views.inbox_create, name="inbox_create"),
    path("inboxes/<str:inbox_id>/lifetime/", views.inbox_lifetime, name="inbox_lifetime"),
    path("inboxes/<str:inbox_id>/smtp-faults/", views.inbox_smtp_faults, name="inbox_smtp_faults"),
    path("inboxes/<str:inbox_id>/delete/", views.inbox_delete, name="inbox_delete"),
    path(
        "inboxes/<str:inbox_id>/smtp-credentials/",
        views.smtp_credential_create,
        name="smtp_credential_create",
    ),
    path(
        "inboxes/<str:inbox_id>/smtp-credentials/<str:credential_id>/revoke/",
        views.smtp_credential_revoke,
        name="smtp_credential_revoke",
    ),
    path("domains/", views.domain_list, name="domain_list"),
    path("domains/add/", views.domain_add, name="domain_add"),
    path("domains/<str:domain>/verify/", views.domain_verify, name="domain_verify"),
    path("domains/<str:domain>/catch-all/", views.domain_catch_all, name="domain_catch_all"),
    path("domains/<str:domain>/remove/", views.domain_remove, name="domain_remove"),
]

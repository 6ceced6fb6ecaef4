"""Dashboard pages of the mail app: an inbox's emails, one email, its HTML, raw and files."""

from __future__ import annotations

from django.urls import path

from mail import views

urlpatterns = [
    path("inboxes/<str:inbox_id>/", views.inbox_detail, name="inbox_detail"),
    path("emails/<str:email_id>/", views.email_detail, name="email_detail"),
    path("emails/<str:email_id>/html", views.email_html, name="email_html"),
    path("emails/<str:email_id>/raw", views.email_raw, name="email_raw"),
    path(
        "emails/<str:email_id>/attachments/<str:attachment_id>",
        views.email_attachment,
        name="email_attachment",
    ),
    path("emails/<str:email_id>/read/", views.email_read, name="email_read"),
    path("emails/<str:email_id>/delete/", views.email_delete, name="email_delete"),
    path("emails/<str:email_id>/labels/", views.email_label_add, name="email_label_add"),
    path(
        "emails/<str:email_id>/labels/<str:key>/example/",
        views.email_label_example,
        name="email_label_example",
    ),
    path(
        "emails/<str:email_id>/labels/<str:key>/remove/",
        views.email_label_remove,
        name="email_label_remove",
    ),
]

"""Dashboard pages of the labels app."""

from __future__ import annotations

from django.urls import path

from labels import views

urlpatterns = [
    path("labels/", views.label_list, name="label_list"),
    path("labels/new/", views.label_new, name="label_new"),
    path("labels/<str:key>/edit/", views.label_edit, name="label_edit"),
    path("labels/<str:key>/delete/", views.label_delete, name="label_delete"),
]

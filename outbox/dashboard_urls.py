"""Dashboard pages of the outbox app: the approvals queue, history and items."""

from __future__ import annotations

from django.urls import path

from outbox import views

urlpatterns = [
    path("approvals/", views.approvals, name="approvals"),
    path("approvals/history/", views.approvals_history, name="approvals_history"),
    path("approvals/outgoing/", views.outgoing, name="outgoing"),
    path("approvals/<str:item_id>/", views.approval_detail, name="approval_detail"),
    path("approvals/<str:item_id>/decide/", views.approval_decide, name="approval_decide"),
]

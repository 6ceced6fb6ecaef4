"""Dashboard pages of the outbox app: the approvals queue, history and items; Connect an agent."""

from __future__ import annotations

from django.urls import path

from outbox import views
from outbox.mcp import views as mcp_views

urlpatterns = [
    path("approvals/", views.approvals, name="approvals"),
    path("approvals/history/", views.approvals_history, name="approvals_history"),
    path("approvals/outgoing/", views.outgoing, name="outgoing"),
    path("approvals/<str:item_id>/", views.approval_detail, name="approval_detail"),
    path("approvals/<str:item_id>/decide/", views.approval_decide, name="approval_decide"),
    path("connect/", mcp_views.connect, name="connect"),
    path("connect/key/", mcp_views.connect_key, name="connect_key"),
]

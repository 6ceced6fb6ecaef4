"""Dashboard pages of the tenancy app: sign-in, password, workspace switcher, members."""

from __future__ import annotations

from django.urls import path

from apikeys import views

urlpatterns = [
    path("", views.home, name="home"),
    path("login/", views.login, name="login"),
    path("logout/", views.logout, name="logout"),
    path("password/", views.password_change, name="password_change"),
    path("password/done/", views.password_change_done, name="password_change_done"),
    path("workspace/switch/", views.workspace_switch, name="workspace_switch"),
    path("members/", views.members, name="members"),
    path("members/add/", views.member_add, name="member_add"),
    path("members/<int:membership_id>/role/", views.member_role, name="member_role"),
    path("members/<int:membership_id>/remove/", views.member_remove, name="member_remove"),
]
